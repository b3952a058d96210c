"""molaccel: GPU toolkit for molecular computing, from Python.

Four engines over one C++20/CUDA library (the same one the ``molaccel`` command line tool uses,
so results are the same bits):

- :mod:`molaccel.lingo`   LINGO similarity of SMILES strings (search, matrix, neighbours, clustering)
- :mod:`molaccel.align`   Smith-Waterman protein database search
- :mod:`molaccel.orbital` molecular orbitals and electron densities on grids
- :mod:`molaccel.linalg`  CG / BiCGStab solvers over the run-time kernel generator

Every compute call takes ``device="auto"|"cpu"|"gpu"|"gpu:0,2"`` (``auto``: the GPUs when there
are any, else the CPU), ``threads`` (CPU threads, 0 = all cores) and ``progress`` (progress bars
on stderr, off by default). The GIL is released while molaccel computes, so Python threads can
call it in parallel (jobs on the same device run one after another). Errors raise
:class:`molaccel.Error` subclasses; bad input raises :class:`molaccel.InputError` (a
``ValueError``) whose ``path`` and ``line`` say where.

Example::

    >>> import molaccel
    >>> molaccel.info()["version"] == molaccel.__version__
    True
"""

from __future__ import annotations

import atexit
from typing import Any

from . import _core
from ._device import DeviceArray
from ._errors import (
    Cancelled,
    CudaError,
    DeviceUnavailable,
    Error,
    InputError,
    NotCompiled,
    NvrtcError,
)

__all__ = [
    "Cancelled",
    "CudaError",
    "DeviceArray",
    "DeviceUnavailable",
    "Error",
    "InputError",
    "NotCompiled",
    "NvrtcError",
    "info",
    "set_log_level",
]

# At interpreter exit a kernel compiling in the background finishes, and the worker pools (and
# their GPU state) stop while the CUDA runtime is still up.
atexit.register(_core.release_resources)

# Version and engines from the build alone: importing queries no GPU (info() does).
__version__: str = _core.version()
_engines = _core.engines()

if "lingo" in _engines:
    from . import lingo  # noqa: F401

    __all__.append("lingo")
if "align" in _engines:
    from . import align  # noqa: F401

    __all__.append("align")
if "orbital" in _engines:
    from . import orbital  # noqa: F401

    __all__.append("orbital")
if "linalg" in _engines:
    from . import linalg  # noqa: F401

    __all__.append("linalg")


def info() -> dict[str, Any]:
    """Build and machine information, like ``molaccel info``.

    Returns a dict: ``version``, ``cuda`` (CUDA backends compiled in), ``cuda_version``,
    ``cuda_archs``, ``compiler``, ``build_type``, ``cpu`` (``model``, ``logical_cores``, ``simd``),
    ``gpus`` (one dict per usable GPU: ``index``, ``name``, ``arch``, ``sm_count``,
    ``total_memory``, ``free_memory``), ``gpu_absence_reason`` (why ``gpus`` is empty), ``nvrtc``
    (NVRTC version as major*1000+minor*10, 0 when it cannot be loaded) and ``engines``.
    A CUDA build on a machine without a driver imports and runs on the CPU; ``gpus`` is then empty.

    Example::

        >>> import molaccel
        >>> d = molaccel.info()
        >>> set(d["engines"]) <= {"lingo", "align", "orbital", "linalg"}
        True
    """
    return _core.info()


_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}


def set_log_level(level: str) -> None:
    """Sets how much molaccel logs on stderr: ``"error"``, ``"warn"`` (default), ``"info"``
    (what ran where, like the CLI's ``-v``) or ``"debug"`` (``-vv``).

    Example::

        >>> import molaccel
        >>> molaccel.set_log_level("warn")
    """
    if level not in _LEVELS:
        raise ValueError(f"unknown log level {level!r} (error, warn, info or debug)")
    _core.set_log_level(_LEVELS[level])
