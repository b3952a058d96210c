"""Exceptions raised by molaccel: one hierarchy, as in the C++ library (include/molaccel/runtime.hpp).

Every exception carries ``source``, the molaccel source file and line that raised it (for bug reports).
"""

from __future__ import annotations


class Error(RuntimeError):
    """Any error raised by molaccel's library code.

    Example::

        try:
            molaccel.lingo.search("missing.smi", "db.smi")
        except molaccel.Error as e:
            print(e, e.source)
    """

    def __init__(self, message: str, source: str = "", **attributes: object) -> None:
        super().__init__(message)
        self.source = source
        for name, value in attributes.items():
            setattr(self, name, value)


class InputError(Error, ValueError):
    """Bad user input: ``str(e)`` reads ``PATH:LINE: message``; ``path``, ``line`` (0 when the
    error is not on a line) and ``detail`` (the message alone) are attributes.

    Example::

        try:
            molaccel.lingo.molecules(["CC(C"])
        except molaccel.InputError as e:
            print(e.path, e.line, e.detail)
    """

    path: str
    line: int
    detail: str

    def __init__(self, message: str, path: str = "", line: int = 0, detail: str = "", source: str = "") -> None:
        super().__init__(message, source, path=path, line=line, detail=detail or message)


class NotCompiled(Error):
    """A backend this build does not contain (e.g. ``device="gpu"`` in a CPU-only build)."""


class DeviceUnavailable(Error):
    """A device was asked for that this machine does not have (``device="gpu"`` without a GPU)."""


class Cancelled(Error):
    """A job was cancelled."""


class CudaError(Error):
    """A CUDA runtime call failed; ``code`` is the cudaError_t value, ``out_of_memory`` a bool."""

    code: int
    out_of_memory: bool


class NvrtcError(Error):
    """NVRTC rejected generated source; ``log`` is the compile log, ``offending_line`` the line."""

    log: str
    offending_line: str
