"""Programs: a whole iterative method written once from Python (re-exported by
:mod:`molaccel.linalg`), as ``molaccel::linalg::Program`` is from C++.

A program declares vectors, scalars and one sparse matrix, then lists setup steps, the loop body,
stop tests and monitors. A step is one statement or several simultaneous ones (each right-hand
side sees the values from before the step). The generator plans the whole iteration: on a GPU it
runs as one generated kernel for the whole solve (grid-wide barriers only where a later statement
needs a reduction or a product of a vector written before); on the CPU each step is one fused,
vectorised, threaded loop. Statements are made with :meth:`Symbol.set`, :meth:`Symbol.add` and
:meth:`Symbol.sub` (``x = e``, ``x += e``, ``x -= e``)::

    from molaccel import linalg
    p = linalg.Program("cg")
    x, r, d, q, b = (p.vector(n) for n in ("x", "r", "d", "q", "b"))
    alpha, rr, rr_old, bound = (p.scalar(n) for n in ("alpha", "rr", "rr_old", "bound"))
    A = p.matrix("A")
    p.setup(r.set(b), d.set(b)).setup(rr.set(linalg.inner_prod(b, b)))
    p.step(q.set(A @ d)).step(alpha.set(rr / linalg.inner_prod(d, q)), rr_old.set(rr))
    p.step(x.add(alpha * d), r.sub(alpha * q)).step(rr.set(linalg.inner_prod(r, r)))
    p.step(d.set(r + (rr / rr_old) * d))
    p.stop_when(1 - linalg.greater(rr, bound), "converged")
    result = p.run(A_csr, vectors={"b": b_values}, scalars={"bound": (1e-8) ** 2 * b_values @ b_values})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from . import _core
from ._common import check_device
from ._expressions import Expr, _tree

_linalg = _core.linalg


class Symbol(Expr):
    """A vector, scalar or the matrix of a :class:`Program`: a leaf of its expressions."""

    __slots__ = ("program", "index", "name", "kind")

    def __init__(self, program: "Program", index: int, name: str, kind: str) -> None:
        self.program, self.index, self.name, self.kind = program, index, name, kind
        super().__init__(("operand", self))

    def set(self, value: Any) -> tuple:
        """The statement ``self = value``."""
        return self._statement("=", value)

    def add(self, value: Any) -> tuple:
        """The statement ``self += value``."""
        return self._statement("+=", value)

    def sub(self, value: Any) -> tuple:
        """The statement ``self -= value``."""
        return self._statement("-=", value)

    def _statement(self, op: str, value: Any) -> tuple:
        if self.kind == "matrix":
            raise TypeError("the matrix of a program is not assigned")
        return (self, op, value)

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name} of program {self.program.name}>"


@dataclass(frozen=True)
class ProgramResult:
    """What a program run returned: ``status`` (a stop test's status, or "iteration limit");
    ``iterations``; ``vectors`` and ``scalars`` (every symbol's final value, by name);
    ``monitor_history`` (per monitor, one value per stop test: iterations + 1); ``barriers_per_iteration``
    (grid-wide barriers of the plan); ``seconds`` (setup and iterations; on a GPU from events);
    ``kernel`` (the form that ran)."""

    status: str
    iterations: int
    vectors: dict
    scalars: dict
    monitor_history: list
    barriers_per_iteration: int
    seconds: float
    kernel: str


class Program:
    """An iterative method as statements over vectors, scalars and one sparse matrix
    (see the module docstring; docs/linalg.md, "Programs", gives the planner's rules).

    Args:
        name: the program's name (in errors and the generated kernel's name).
        dtype: ``numpy.float64`` or ``numpy.float32``: what vectors and the matrix hold (scalars
            and sums are double on a GPU).

    Example::

        >>> import numpy as np
        >>> from molaccel import linalg
        >>> p = linalg.Program("jacobi_sweeps")
        >>> x, b = p.vector("x"), p.vector("b")
        >>> A = p.matrix("A")
        >>> _ = p.step(x.add(0.25 * (b - A @ x)))
        >>> r = p.run(linalg.poisson_2d(4), vectors={"b": np.ones(16)}, max_iterations=200, device="cpu")
        >>> r.iterations, bool(np.allclose(linalg.poisson_2d(4) @ r.vectors["x"], 1.0))
        (200, True)
    """

    def __init__(self, name: str, *, dtype: Any = np.float64, _core_program: Any = None) -> None:
        self._p = _core_program if _core_program is not None else _linalg.Program(name, np.dtype(dtype).name)
        self._symbols = [Symbol(self, i, n, k) for i, (n, k) in enumerate(self._p.symbols)]

    @property
    def name(self) -> str:
        return self._p.name

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._p.dtype)

    def _declare(self, name: str, kind: str) -> Symbol:
        index = self._p.declare(name, kind)
        s = Symbol(self, index, name, kind)
        self._symbols.append(s)
        return s

    def vector(self, name: str) -> Symbol:
        """A vector of the matrix's length (zero unless given to :meth:`run`)."""
        return self._declare(name, "vector")

    def scalar(self, name: str) -> Symbol:
        """A scalar (zero unless given to :meth:`run`)."""
        return self._declare(name, "scalar")

    def matrix(self, name: str) -> Symbol:
        """The program's square sparse matrix (one per program), for ``A @ v`` or ``prod(A, v)``."""
        return self._declare(name, "matrix")

    def __getitem__(self, name: str) -> Symbol:
        """A declared symbol by name (e.g. of :func:`method_program`'s programs)."""
        for s in self._symbols:
            if s.name == name:
                return s
        raise KeyError(f"program {self.name} has no symbol {name!r}")

    def setup(self, *statements: tuple) -> "Program":
        """A step before the loop: one statement or several simultaneous ones."""
        self._p.setup(self._statements(statements))
        return self

    def step(self, *statements: tuple) -> "Program":
        """A step of the loop body (steps run in order): one statement or several simultaneous ones."""
        self._p.step(self._statements(statements))
        return self

    def stop_when(self, condition: Any, status: str) -> "Program":
        """Stop with ``status`` when the scalar expression ``condition`` is non-zero; tested
        after the setup and after every iteration, in order of declaration."""
        self._p.stop_when(self._tree(condition), status)
        return self

    def transposed_product(self, target: Symbol, source: Symbol) -> "Program":
        """Before the setup, ``target = A^T source`` of ``source``'s input value (vectors of this
        program), computed when the inputs are packed: a product with the transpose is a scatter,
        which the row-wise steps cannot say. One-barrier BiCGStab reads (A^T r0, p) = (r0, A p)."""
        for s in (target, source):
            if not isinstance(s, Symbol) or s.program is not self or s.kind != "vector":
                raise ValueError("linalg program: a transposed product reads and writes vectors of this program")
        self._p.transposed_product(target.index, source.index)
        return self

    def inverse_diagonal(self, target: Symbol) -> "Program":
        """Before the setup, ``target = 1 / diag(A)`` (1 where a row has no diagonal entry or a
        zero one: solve()'s Jacobi preconditioner), computed when the inputs are packed unless
        they give ``target``."""
        if not isinstance(target, Symbol) or target.program is not self or target.kind != "vector":
            raise ValueError("linalg program: an inverse diagonal is a vector of this program")
        self._p.inverse_diagonal(target.index)
        return self

    def monitor(self, value: Any) -> "Program":
        """Record the scalar expression ``value`` at every stop test (``monitor_history``)."""
        self._p.monitor(self._tree(value))
        return self

    @property
    def barriers_per_iteration(self) -> int:
        """Grid-wide barriers per iteration in the generated kernel."""
        return self._p.barriers_per_iteration

    def describe(self) -> str:
        """The plan: one line per segment between barriers."""
        return self._p.describe()

    def cuda_source(self) -> str:
        """The generated CUDA translation unit (the streamed, any-size form)."""
        return self._p.cuda_source()

    def run(
        self,
        A: Any = None,
        *,
        vectors: Mapping[str, Any] | None = None,
        scalars: Mapping[str, float] | None = None,
        max_iterations: int = 1000,
        device: str = "auto",
        threads: int = 0,
    ) -> ProgramResult:
        """Runs the setup, then iterations until a stop test fires or ``max_iterations``.

        Args:
            A: the matrix (as :func:`molaccel.linalg.solve` takes it), or ``None`` for a program
                without one (then ``vectors`` give the length).
            vectors: initial values by name (float arrays of the matrix's length); others start at 0.
            scalars: initial values by name; others start at 0.
            max_iterations: iteration limit (status "iteration limit").
            device, threads: where it runs (a GPU: one generated kernel; the CPU: one fused loop per step).

        Returns:
            :class:`ProgramResult`.
        """
        from .linalg import _as_csr, _index_array

        check_device(device, threads)
        if A is None:
            indptr = indices = data = None
            rows = cols = 0
        else:
            m = _as_csr(A)
            rows, cols = int(m.shape[0]), int(m.shape[1])
            indptr, indices = _index_array(m.indptr, "indptr"), _index_array(m.indices, "indices")
            data = np.ascontiguousarray(m.data, dtype=np.float64)
        given = {}
        for name, values in (vectors or {}).items():
            v = np.ascontiguousarray(values, dtype=np.float64)
            if v.ndim != 1:
                raise ValueError(f"vector {name!r} must be one-dimensional (got shape {v.shape})")
            given[name] = v
        r = self._p.run(indptr, indices, data, rows, cols, given,
                        {k: float(v) for k, v in (scalars or {}).items()}, int(max_iterations), device, threads)
        return ProgramResult(**r)

    def _tree(self, value: Any) -> tuple:
        def convert(tree: tuple) -> tuple:
            if tree[0] == "operand":
                obj = tree[1]
                if isinstance(obj, float):
                    return ("constant", obj)
                if isinstance(obj, Symbol) and obj.program is self:
                    return ("symbol", obj.index)
                raise TypeError(
                    f"a program's expressions hold its own symbols and numbers, not {type(obj).__name__}"
                    + (f" {obj.name} of program {obj.program.name}" if isinstance(obj, Symbol) else ""))
            if tree[0] == "modifier":
                return (tree[0], tree[1], tree[2], convert(tree[3]))
            return (tree[0], *[convert(t) for t in tree[1:]])

        return convert(_tree(value))

    def _statements(self, statements: tuple) -> list:
        if not statements:
            raise ValueError("a step needs at least one statement")
        out = []
        for s in statements:
            if not (isinstance(s, tuple) and len(s) == 3 and isinstance(s[0], Symbol)):
                raise TypeError("a statement is made by symbol.set(e), symbol.add(e) or symbol.sub(e)")
            target, op, value = s
            if target.program is not self:
                raise TypeError(f"{target.name} belongs to program {target.program.name}")
            out.append((target.index, op, self._tree(value)))
        return out

    def __repr__(self) -> str:
        return f"<molaccel.linalg.Program {self.name}: {len(self._symbols)} symbols>"


def method_program(name: str, *, dtype: Any = np.float64, preconditioner: str = "none") -> Program:
    """A method written as a program: ``"cg"``, ``"bicgstab"``, ``"pipelined_cg"`` (Ghysels &
    Vanroose: one grid-wide barrier per iteration), ``"pipelined_bicgstab"`` (two) or
    ``"one_barrier_bicgstab"`` (one: products nested one level, A^T b from transposed_product).
    x0 = 0; inputs: vector ``"b"``, scalar ``"bound"`` = (tol * ||b||)^2; result
    ``vectors["x"]``; monitor 0 is ||r|| / ||b||. ``preconditioner="jacobi"`` (cg, bicgstab,
    one_barrier_bicgstab) applies M = diag(A)^-1 as :func:`solve` does (the vector ``"d"``, from
    :meth:`Program.inverse_diagonal`); the others are unpreconditioned.

    Example::

        >>> import numpy as np
        >>> from molaccel import linalg
        >>> p = linalg.method_program("pipelined_cg")
        >>> A = linalg.poisson_2d(8); b = A @ np.ones(64)
        >>> r = p.run(A, vectors={"b": b}, scalars={"bound": 1e-20 * (b @ b)}, device="cpu")
        >>> r.status, p.barriers_per_iteration
        ('converged', 1)
    """
    return Program(
        name, dtype=dtype, _core_program=_linalg.method_program(name, np.dtype(dtype).name, preconditioner)
    )
