"""Molecular orbitals and electron densities on grids, as ``molaccel orbital info|grid``.

Conventions (as the CLI's ``--help``): input files are Molden ([Atoms] AU or Angs, [GTO], [MO],
[5D] [5D7F] [5D10F] [7F] [9G]) or Gaussian .fchk, plain or gzip. Lengths given to these
functions (``spacing``, ``padding``, ``origin``, ``size``) are in angstrom, as on the command line;
everything returned (atom positions, grid origin and axes) is in bohr, as in cube files. Orbitals:
``"homo"``, ``"lumo"``, ``"homo-N"``, ``"lumo+N"`` or a 1-based index ``"12"`` (or the int 12),
optionally prefixed ``"alpha:"`` or ``"beta:"``. The MO coefficients are checked for
orthonormality against the overlap matrix and a known writer convention is applied when needed
(``wfn.normalisation`` says which).

Grids follow the Gaussian cube layout: point (i, j, k) is at origin + i*axes[0] + j*axes[1] +
k*axes[2], and ``values[i, j, k]`` is its value (k fastest in memory, the cube file's order).
"""

from __future__ import annotations

import os
from typing import Any, Sequence, Union

import numpy as np

from . import _core
from ._common import check_device, is_path
from ._device import DeviceArray, check_device_output

__all__ = ["read", "grid", "density", "write_cube", "Grid", "Wavefunction", "BOHR_IN_ANGSTROM"]

_orbital = _core.orbital

#: Bohr in angstrom (CODATA 2014, as in Psi4 and VMD).
BOHR_IN_ANGSTROM: float = _orbital.bohr_in_angstrom

#: The wavefunction class returned by :func:`read`. Attributes: ``source``, ``format``
#: ("molden" or "fchk"), ``writer``, ``atoms`` (dict: ``atomic_numbers``, ``labels``,
#: ``positions`` (n, 3) bohr, ``charges``), ``shells`` (list of dicts), ``function_count``,
#: ``alpha`` and ``beta`` (dicts: ``energies`` hartree, ``occupations``, ``symmetries``,
#: ``coefficients`` (orbitals, functions)), ``unrestricted``, ``electron_count``,
#: ``normalisation``; methods ``orbital_index(name)`` -> (spin, 0-based index) and
#: ``describe_orbital(name)``.
Wavefunction = _orbital.Wavefunction


def read(path: str | os.PathLike[str], *, check_normalisation: bool = True, tolerance: float = 1e-4) -> Any:
    """Reads a Molden or .fchk file (plain or gzip; the format is found from the content).

    Args:
        path: the file.
        check_normalisation: compute the overlap matrix, check C^T S C = I and apply a writer's
            convention fix when needed (as the CLI always does).
        tolerance: the largest |C^T S C - I| accepted.

    Raises:
        molaccel.InputError: bad or truncated input, with the file and line.

    Example::

        >>> from molaccel import orbital
        >>> wfn = orbital.read("data/orbital/h2o_631gs.molden")
        >>> wfn.function_count, wfn.electron_count
        (18, 10.0)
    """
    return _orbital.read(os.fspath(path), check_normalisation, float(tolerance))


class Grid:
    """Values on a grid: ``values`` (float32, shape (nx, ny, nz), or (fields, nx, ny, nz) for
    several orbitals; a NumPy array, or a :class:`molaccel.DeviceArray` in GPU memory with
    ``device_output=True``), ``origin`` (3,) and ``axes`` (3, 3) step vectors in bohr, ``backend``
    (what ran), ``seconds`` (the library's evaluation time). ``spec`` is the grid for
    :func:`grid`'s ``like`` and :func:`write_cube`. Read-only.

    Example::

        >>> from molaccel import orbital
        >>> g = orbital.grid("data/orbital/h2o_631gs.molden", "homo", spacing=0.3)
        >>> g.counts, g.origin.shape, g.axes.shape
        ((21, 27, 23), (3,), (3, 3))
    """

    # Slots behind read-only properties, origin and axes made on first use: a call returns its
    # Grid in a fraction of a microsecond (bench/python/bench_orbital_grid.py).
    __slots__ = ("_values", "_backend", "_seconds", "_spec", "_origin", "_axes")

    def __init__(self, values: Union[np.ndarray, DeviceArray], backend: str, seconds: float, spec: Any) -> None:
        self._values = values
        self._backend = backend
        self._seconds = seconds
        self._spec = spec
        self._origin: np.ndarray | None = None
        self._axes: np.ndarray | None = None

    def __repr__(self) -> str:
        return f"Grid(shape={tuple(self._values.shape)}, backend={self._backend!r}, seconds={self._seconds:.6f})"

    @property
    def values(self) -> Union[np.ndarray, DeviceArray]:
        """The values, float32: (nx, ny, nz), or (fields, nx, ny, nz) for several orbitals."""
        return self._values

    @property
    def backend(self) -> str:
        """What ran, e.g. ``"cpu/avx2"``, ``"cuda_jit"``."""
        return self._backend

    @property
    def seconds(self) -> float:
        """The library's evaluation time (the CLI's ``--json`` ``"seconds"``)."""
        return self._seconds

    @property
    def spec(self) -> Any:
        """The grid (a GridSpec: ``origin``, ``axes``, ``counts``), for ``like`` and :func:`write_cube`."""
        return self._spec

    @property
    def origin(self) -> np.ndarray:
        """The grid's first point, bohr, shape (3,) (read-only)."""
        if self._origin is None:
            self._origin = np.array(self._spec.origin)
            self._origin.flags.writeable = False
        return self._origin

    @property
    def axes(self) -> np.ndarray:
        """Step vectors along i, j, k, bohr, shape (3, 3), row d for axis d (read-only)."""
        if self._axes is None:
            self._axes = np.array(self._spec.axes)
            self._axes.flags.writeable = False
        return self._axes

    @property
    def counts(self) -> tuple[int, int, int]:
        """Points along i, j, k: ``values.shape`` for one field."""
        return tuple(self._spec.counts)

    @property
    def voxel_volume(self) -> float:
        """Volume of one grid cell, bohr^3 (sum(values) * voxel_volume integrates)."""
        return float(self._spec.voxel_volume)


def _wavefunction(wfn: Any) -> Any:
    return wfn if type(wfn) is Wavefunction or not is_path(wfn) else read(wfn)


def _grid_spec(
    wfn: Any,
    spacing: float,
    padding: float,
    origin: Sequence[float] | None,
    size: Sequence[float] | None,
    like: Any,
) -> Any:
    if like is not None:
        if isinstance(like, Grid):
            return like.spec
        if isinstance(like, _orbital.GridSpec):
            return like
        return _orbital.grid_of_cube(os.fspath(like))
    if origin is not None or size is not None:
        if origin is None or size is None or len(origin) != 3 or len(size) != 3:
            raise ValueError("give both origin=(x, y, z) and size=(x, y, z), in angstrom")
        return _orbital.explicit_grid([float(v) for v in origin], [float(v) for v in size], float(spacing))
    return _orbital.automatic_grid(wfn, float(padding), float(spacing))


OrbitalName = Union[str, int]


def grid(
    wfn: Any,
    orbitals: OrbitalName | Sequence[OrbitalName] = ("homo",),
    *,
    spacing: float = 0.1,
    padding: float = 3.0,
    origin: Sequence[float] | None = None,
    size: Sequence[float] | None = None,
    like: Any = None,
    backend: str = "auto",
    screening: float = 1e-9,
    device: str = "auto",
    threads: int = 0,
    progress: bool = False,
    device_output: bool = False,
) -> Grid:
    """Orbital values on a grid (``molaccel orbital grid --orbital ...``).

    Args:
        wfn: a wavefunction from :func:`read`, or a path.
        orbitals: one orbital name or several (see the module docstring).
        spacing: grid spacing, angstrom (VMD's high resolution: 0.075).
        padding: automatic box: padding around the atoms, angstrom.
        origin, size: an explicit box (angstrom) instead of the automatic one.
        like: take the grid of a cube file (path) or of another :class:`Grid`.
        backend: ``"auto"``, ``"cpu"``, ``"cuda-jit"``, ``"cuda-generic"`` or ``"reference"``
            (the slow double-precision oracle).
        screening: skip primitives below this magnitude (0 = no screening).
        device, threads, progress: where it runs.
        device_output: leave the values in GPU memory (on the first GPU of ``device``) as a
            :class:`molaccel.DeviceArray`, which CuPy and PyTorch take without a copy
            (``cupy.asarray(g.values)``, ``torch.from_dlpack(g.values)``). Needs a GPU
            (:class:`molaccel.DeviceUnavailable` without one) and a CUDA backend.

    Returns:
        :class:`Grid` with values of shape (nx, ny, nz) for one orbital, (n, nx, ny, nz) for
        several, in the cube file's order.

    Example::

        >>> from molaccel import orbital
        >>> g = orbital.grid("data/orbital/h2o_631gs.molden", "homo", spacing=0.2)
        >>> g.values.shape == g.counts
        True
    """
    check_device(device, threads)
    w = _wavefunction(wfn)
    single = isinstance(orbitals, (str, int))
    names = [str(orbitals)] if single else [str(o) for o in orbitals]  # type: ignore[union-attr]
    spec = _grid_spec(w, spacing, padding, origin, size, like)
    values, used, seconds = _orbital.evaluate_orbitals(
        w, spec, names, backend, float(screening), device, threads, progress, check_device_output(device_output)
    )
    return Grid(values, used, seconds, spec)


def density(
    wfn: Any,
    kind: str = "total",
    *,
    spacing: float = 0.1,
    padding: float = 3.0,
    origin: Sequence[float] | None = None,
    size: Sequence[float] | None = None,
    like: Any = None,
    backend: str = "auto",
    screening: float = 1e-9,
    device: str = "auto",
    threads: int = 0,
    progress: bool = False,
    device_output: bool = False,
) -> Grid:
    """Electron density sum_i occ_i |psi_i|^2 on a grid, e/bohr^3 (``molaccel orbital grid
    --density KIND``).

    Args:
        wfn: a wavefunction from :func:`read`, or a path.
        kind: ``"total"``, ``"spin"`` (alpha minus beta), ``"alpha"`` or ``"beta"``.
        spacing, padding, origin, size, like, backend, screening, device, threads, progress,
            device_output: as in :func:`grid`.

    Returns:
        :class:`Grid` with values of shape (nx, ny, nz).

    Example::

        >>> from molaccel import orbital
        >>> g = orbital.density("data/orbital/h2o_631gs.molden", spacing=0.1)
        >>> round(float(g.values.sum(dtype="f8") * g.voxel_volume), 1)
        10.0
    """
    check_device(device, threads)
    w = _wavefunction(wfn)
    spec = _grid_spec(w, spacing, padding, origin, size, like)
    values, used, seconds = _orbital.evaluate_density(
        w, spec, kind, backend, float(screening), device, threads, progress, check_device_output(device_output)
    )
    return Grid(values, used, seconds, spec)


def write_cube(
    path: str | os.PathLike[str],
    wfn: Any,
    grid: Grid,
    *,
    title: str = "molaccel orbital grid",
    description: str = "",
) -> None:
    """Writes one field of ``grid`` as a Gaussian cube file (atomically: no partial file on
    failure), byte for byte as ``molaccel orbital grid`` writes it for the same title and
    description (the CLI's description is ``"orbital <describe_orbital(name)>"``).

    Example::

        >>> from molaccel import orbital
        >>> wfn = orbital.read("data/orbital/h2o_631gs.molden")
        >>> g = orbital.grid(wfn, "homo", spacing=0.2)
        >>> orbital.write_cube("homo.cube", wfn, g, description="orbital " + wfn.describe_orbital("homo"))
    """
    if isinstance(grid.values, DeviceArray):
        raise TypeError("write_cube writes host values: give a Grid made without device_output (or copy it)")
    values = np.ascontiguousarray(grid.values, dtype=np.float32)
    if values.ndim != 3:
        raise ValueError("write_cube writes one field: give a Grid of one orbital or a density")
    _orbital.write_cube(os.fspath(path), wfn, grid.spec, values.reshape(-1), title, description)
