"""Krylov solvers (CG, BiCGStab and their pipelined forms) built from molaccel's run-time kernel
generator, as ``molaccel linalg solve``; the generator itself (:class:`Vector` expressions) and
whole iterative methods written as programs (:class:`Program`).

Matrices are compressed sparse rows: a SciPy sparse matrix (any format with ``tocsr()``), a
:class:`CSR` (from :func:`poisson_2d` or :func:`read_matrix_market`), or a tuple
``(data, indices, indptr)`` in SciPy's order (square: n = len(indptr) - 1). SciPy is optional.

Conventions (as the CLI's ``--help``): x starts at 0; without ``b``, b = A * ones, so the exact
solution is all ones. The iteration stops when ||r|| / ||b|| <= ``tol`` (r from the solver's
recurrence) or after ``max_iterations``. Launch modes: ``"auto"`` runs the method on a GPU as
its generated program (:func:`method_program`, Jacobi too), one kernel for the whole solve
(BiCGStab on a constant stencil as one-barrier BiCGStab), and on the CPU as fused, threaded
loops; ``"generated"`` runs the program everywhere (on the CPU its steps); ``"graph"`` (cg and
bicgstab) replays ``batch`` iterations of the generator's kernels as one CUDA graph per host
check.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, NamedTuple, Tuple, Union

import numpy as np

from . import _core
from ._common import check_device

__all__ = ["CSR", "SolveResult", "solve", "poisson_2d", "read_matrix_market", "read_matrix_market_vector",
           # the expression generator (molaccel/_expressions.py)
           "Vector", "Scalar", "SparseMatrix", "Expr", "elementwise", "exp", "log", "sqrt", "abs", "sin", "cos",
           "tanh", "nonzero", "norm_2", "element_prod", "element_div", "max", "min", "pow", "safe_div", "greater",
           "inner_prod", "prod",
           # whole iterative methods (molaccel/_programs.py)
           "Program", "ProgramResult", "Symbol", "method_program"]

_linalg = _core.linalg


class CSR(NamedTuple):
    """A sparse matrix as SciPy's three CSR arrays and its shape."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: Tuple[int, int]

    def to_scipy(self) -> Any:
        """The same matrix as ``scipy.sparse.csr_matrix`` (needs SciPy)."""
        import scipy.sparse

        return scipy.sparse.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        """y = A x in double precision, row by row in stored order (as the CLI's residual check)."""
        x = np.asarray(x, dtype=np.float64)
        rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))
        return np.bincount(rows, weights=self.data * x[self.indices], minlength=self.shape[0])


MatrixInput = Union[CSR, Tuple[np.ndarray, np.ndarray, np.ndarray], Any]


def _as_csr(a: MatrixInput) -> CSR:
    if isinstance(a, CSR):
        return a
    if hasattr(a, "tocsr"):  # SciPy sparse matrix or array
        m: Any = getattr(a, "tocsr")()
        if not m.has_canonical_format:
            m = m.copy()
            m.sum_duplicates()  # sorts indices too
        return CSR(m.data, m.indices, m.indptr, tuple(m.shape))
    if isinstance(a, tuple) and len(a) == 3:
        data, indices, indptr = (np.asarray(v) for v in a)
        n = len(indptr) - 1
        return CSR(data, indices, indptr, (n, n))
    raise TypeError(
        "A must be a SciPy sparse matrix, a molaccel.linalg.CSR or a (data, indices, indptr) tuple "
        f"(got {type(a).__name__})"
    )


def _index_array(v: np.ndarray, what: str) -> np.ndarray:
    v = np.asarray(v)
    if v.dtype.kind not in "iu":
        raise TypeError(f"{what} must hold integers (got dtype {v.dtype})")
    if v.size and (v.max() > np.iinfo(np.int32).max or v.min() < 0):
        raise ValueError(f"{what} does not fit 32-bit indices (molaccel's CSR format)")
    return np.ascontiguousarray(v, dtype=np.int32)  # no copy when it already is


@dataclass(frozen=True)
class SolveResult:
    """What a solve returned: ``x``; ``status`` ("converged", "max_iterations",
    "breakdown_rho", "breakdown_omega", "breakdown_alpha", "zero_rhs"); ``status_text`` (the
    CLI's words for it); ``iterations``;
    ``relative_residual`` (||r|| / ||b|| of the recurrence); ``residual_history`` (one per
    iteration, from 0); ``seconds`` (iteration loop only); ``seconds_per_iteration``;
    ``kernels_per_iteration`` (GPU launches, 0 on the CPU); ``host_checks``; ``backend``."""

    x: np.ndarray
    status: str
    status_text: str
    iterations: int
    relative_residual: float
    residual_history: np.ndarray
    seconds: float
    seconds_per_iteration: float
    kernels_per_iteration: int
    host_checks: int
    backend: str

    @property
    def converged(self) -> bool:
        """True when the solve converged (or b was zero): the CLI's exit status 0."""
        return self.status in ("converged", "zero_rhs")


def solve(
    A: MatrixInput,
    b: np.ndarray | None = None,
    *,
    solver: str = "bicgstab",
    preconditioner: str = "none",
    precision: str = "fp64",
    tol: float = 1e-8,
    max_iterations: int = 1000,
    launch: str = "auto",
    batch: int = 0,
    device: str = "auto",
    threads: int = 0,
    progress: bool = False,
) -> SolveResult:
    """Solves A x = b from x = 0 (``molaccel linalg solve``).

    A solver that does not converge is not an error: check ``result.converged`` (the CLI exits
    with status 5 then).

    Args:
        A: the square matrix (see the module docstring); indices sorted and unique per row
            (SciPy matrices are brought to that form).
        b: the right-hand side (float64, read in place when contiguous); ``None``: A * ones.
        solver: ``"bicgstab"``, ``"cg"`` (symmetric positive definite A), or their pipelined
            forms ``"pipelined_cg"`` and ``"pipelined_bicgstab"`` (the generated programs of
            :func:`method_program`: fewer grid-wide barriers per iteration; unpreconditioned,
            ``launch="auto"`` or ``"generated"``).
        preconditioner: ``"none"`` or ``"jacobi"`` (M = diag(A)^-1).
        precision: ``"fp64"`` or ``"fp32"`` (matrix values, vectors and GPU iterations).
        tol: stop when ||r|| / ||b|| <= tol.
        max_iterations: iteration limit.
        launch: ``"auto"``, ``"generated"`` or ``"graph"``.
        batch: ``launch="graph"``: iterations per host check (0 = automatic).
        device, threads, progress: where it runs.

    Returns:
        :class:`SolveResult`.

    Example::

        >>> import numpy as np
        >>> from molaccel import linalg
        >>> r = linalg.solve(linalg.poisson_2d(16), device="cpu")
        >>> r.converged, bool(np.allclose(r.x, 1.0))
        (True, True)
    """
    check_device(device, threads)
    m = _as_csr(A)
    rows, cols = int(m.shape[0]), int(m.shape[1])
    indptr, indices = _index_array(m.indptr, "indptr"), _index_array(m.indices, "indices")
    data = np.ascontiguousarray(m.data, dtype=np.float64)
    if b is None:
        if len(indptr) != rows + 1 or len(indices) != len(data) or (indices >= cols).any():
            raise ValueError("A's CSR arrays do not describe a matrix of its shape")
        b = CSR(data, indices, indptr, (rows, cols)) @ np.ones(cols)
    bb = np.ascontiguousarray(b, dtype=np.float64)
    if bb.ndim != 1:
        raise ValueError(f"b must be one-dimensional (got shape {bb.shape})")
    r = _linalg.solve(
        indptr,
        indices,
        data,
        rows,
        cols,
        bb,
        solver,
        preconditioner,
        precision,
        float(tol),
        int(max_iterations),
        launch,
        int(batch),
        device,
        threads,
        progress,
    )
    return SolveResult(**r)


def poisson_2d(n: int) -> CSR:
    """The seed's benchmark matrix: the 2-D Poisson 5-point stencil on an n x n grid (4 on the
    diagonal, -1 for each grid neighbour), n^2 rows (``molaccel linalg solve --poisson N``).

    Example::

        >>> from molaccel import linalg
        >>> linalg.poisson_2d(3).shape
        (9, 9)
    """
    data, indices, indptr, shape = _linalg.poisson_2d(int(n))
    return CSR(data, indices, indptr, tuple(shape))


def read_matrix_market(path: str | os.PathLike[str]) -> CSR:
    """Reads a Matrix Market file (coordinate or array; real, integer or pattern; general or
    symmetric, mirrored; duplicates summed) into CSR.

    Example::

        >>> from molaccel import linalg
        >>> linalg.read_matrix_market("data/linalg/1138_bus.mtx").shape
        (1138, 1138)
    """
    data, indices, indptr, shape = _linalg.read_matrix_market(os.fspath(path))
    return CSR(data, indices, indptr, tuple(shape))


def read_matrix_market_vector(path: str | os.PathLike[str]) -> np.ndarray:
    """Reads a vector (an n x 1 or 1 x n array or coordinate file), e.g. the ``-o`` output of
    ``molaccel linalg solve``.

    Example::

        >>> from molaccel import linalg
        >>> x = linalg.read_matrix_market_vector("/tmp/x.mtx")  # doctest: +SKIP
    """
    return _linalg.read_matrix_market_vector(os.fspath(path))


# The expression generator. Imported last: its names (abs, max, min, pow) shadow builtins here.
from ._expressions import (  # noqa: E402
    Expr,
    Scalar,
    SparseMatrix,
    Vector,
    abs,
    cos,
    element_div,
    element_prod,
    elementwise,
    exp,
    greater,
    inner_prod,
    log,
    max,
    min,
    nonzero,
    norm_2,
    pow,
    prod,
    safe_div,
    sin,
    sqrt,
    tanh,
)
from ._programs import Program, ProgramResult, Symbol, method_program  # noqa: E402
