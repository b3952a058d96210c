"""The linalg expression generator from Python (re-exported by :mod:`molaccel.linalg`).

Vectors, scalars and sparse matrices are containers in host or GPU memory; their operators build
an expression, and an assignment (``x += e``, ``x -= e``, ``x[:] = e``, ``x.assign(e)``) runs it
as one generated, fused kernel (or one fused CPU loop), as ``CustomOperation`` does in C++::

    x += (alpha + beta) * x - (y - F(G(z)))

Each distinct statement is planned and compiled once and reused. Python numbers are passed by
value, so changing them between runs reuses the kernel.
"""

from __future__ import annotations

from typing import Any, Callable, Union

import numpy as np

from . import _core

_linalg = _core.linalg

Operand = Union["Vector", "Scalar", "SparseMatrix", float, int]


class Expr:
    """An expression over vectors, scalars and matrices; run it by assigning it to a container."""

    __slots__ = ("_tree",)
    __array_ufunc__ = None  # numpy scalars on the left defer to our operators (2.0 * x is an Expr)

    def __init__(self, tree: tuple) -> None:
        self._tree = tree

    # Arithmetic: scalars broadcast over vectors; vector * vector is an error (element_prod).
    def __add__(self, other: Any) -> "Expr":
        return Expr(("add", _tree(self), _tree(other)))

    def __radd__(self, other: Any) -> "Expr":
        return Expr(("add", _tree(other), _tree(self)))

    def __sub__(self, other: Any) -> "Expr":
        return Expr(("sub", _tree(self), _tree(other)))

    def __rsub__(self, other: Any) -> "Expr":
        return Expr(("sub", _tree(other), _tree(self)))

    def __mul__(self, other: Any) -> "Expr":
        return Expr(("mul", _tree(self), _tree(other)))

    def __rmul__(self, other: Any) -> "Expr":
        return Expr(("mul", _tree(other), _tree(self)))

    def __truediv__(self, other: Any) -> "Expr":
        return Expr(("div", _tree(self), _tree(other)))

    def __rtruediv__(self, other: Any) -> "Expr":
        return Expr(("div", _tree(other), _tree(self)))

    def __neg__(self) -> "Expr":
        return Expr(("neg", _tree(self)))

    def __matmul__(self, other: Any) -> "Expr":
        return Expr(("prod", _tree(self), _tree(other)))


def _tree(value: Any) -> tuple:
    if isinstance(value, Expr):
        return value._tree
    if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        return ("operand", float(value))
    raise TypeError(f"a linalg expression cannot hold a {type(value).__name__}")


class _Container(Expr):
    __slots__ = ("_c",)

    def __init__(self, core: Any) -> None:
        self._c = core
        super().__init__(("operand", self))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._c.dtype)

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"gpu:N"``: where the memory lives."""
        return "cpu" if self._c.device < 0 else f"gpu:{self._c.device}"

    def to_numpy(self) -> np.ndarray:
        """A NumPy copy (waits for the queued work)."""
        return self._c.to_numpy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        values = self.to_numpy()
        return values if dtype is None else values.astype(dtype)

    # Zero-copy exchange (the mechanism of molaccel.DeviceArray): linalg's queued work on the
    # device is waited for before the memory is handed out, so the consumer may use it on any
    # stream, its own included; DLPack's ``stream`` is checked (0 is refused) and nothing more.
    def __dlpack__(self, *, stream: Any = None, **kwargs: Any) -> Any:
        return self._c.view(stream)  # a "dltensor" capsule over the memory, owning a reference to it

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0) if self._c.device < 0 else (2, self._c.device)  # kDLCPU, kDLCUDA

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self._c.cuda_array_interface()  # AttributeError for host memory

    # Assignment runs the statement.
    def assign(self, value: Any) -> None:
        """``self = value`` as one generated kernel."""
        _execute(self, "=", value)

    def __setitem__(self, key: Any, value: Any) -> None:
        if key is not Ellipsis and key != slice(None):
            raise IndexError("assign whole containers: x[:] = expression")
        _execute(self, "=", value)

    def __iadd__(self, value: Any) -> "_Container":
        _execute(self, "+=", value)
        return self

    def __isub__(self, value: Any) -> "_Container":
        _execute(self, "-=", value)
        return self


class Vector(_Container):
    """A dense vector in host memory or on a GPU (where ``device`` puts it: ``"auto"`` is the
    first GPU when there is one).

    Example::

        >>> import numpy as np
        >>> from molaccel import linalg
        >>> x = linalg.Vector(np.ones(4)); y = linalg.Vector(np.arange(4.0))
        >>> x += 2 * y - 1
        >>> x.to_numpy().tolist()
        [0.0, 2.0, 4.0, 6.0]
    """

    __slots__ = ()

    def __init__(self, values: Any, *, dtype: Any = None, device: str = "auto", threads: int = 0) -> None:
        if isinstance(values, (int, np.integer)):
            values = np.zeros(int(values), dtype=dtype or np.float64)
        array = np.ascontiguousarray(values, dtype=dtype or (None if np.asarray(values).dtype.kind == "f" else np.float64))
        if array.dtype not in (np.float64, np.float32) or array.ndim != 1:
            raise TypeError("a Vector holds a one-dimensional float64 or float32 array")
        super().__init__(_linalg.Container(array, array.dtype.name, False, device, threads))

    def __len__(self) -> int:
        return len(self._c)

    def __repr__(self) -> str:
        return f"<molaccel.linalg.Vector of {len(self)} {self.dtype.name} on {self.device}>"


class Scalar(_Container):
    """A scalar in device memory (on the host without a GPU): a target for ``inner_prod`` and
    ``norm_2`` that later kernels read without a trip to the host.

    Example::

        >>> import numpy as np
        >>> from molaccel import linalg
        >>> x = linalg.Vector(np.array([3.0, 4.0])); s = linalg.Scalar(0.0)
        >>> s[:] = linalg.norm_2(x)
        >>> s.value
        5.0
    """

    __slots__ = ()

    def __init__(self, value: float = 0.0, *, dtype: Any = np.float64, device: str = "auto", threads: int = 0) -> None:
        array = np.array([value], dtype=dtype)
        super().__init__(_linalg.Container(array, array.dtype.name, True, device, threads))

    @property
    def value(self) -> float:
        return float(self.to_numpy()[0])

    def __float__(self) -> float:
        return self.value


class SparseMatrix(Expr):
    """A CSR matrix in host memory or on a GPU, for ``prod(A, x)`` (or ``A @ x``) in expressions.

    Example::

        >>> import numpy as np
        >>> from molaccel import linalg
        >>> A = linalg.SparseMatrix(linalg.poisson_2d(2)); x = linalg.Vector(np.ones(4)); y = linalg.Vector(4)
        >>> y[:] = A @ x
        >>> y.to_numpy().tolist()
        [2.0, 2.0, 2.0, 2.0]
    """

    __slots__ = ("_m",)

    def __init__(self, matrix: Any, *, dtype: Any = np.float64, device: str = "auto", threads: int = 0) -> None:
        from .linalg import _as_csr, _index_array

        m = _as_csr(matrix)
        self._m = _linalg.SparseMatrix(
            _index_array(m.indptr, "indptr"), _index_array(m.indices, "indices"),
            np.ascontiguousarray(m.data, dtype=np.float64), int(m.shape[0]), int(m.shape[1]),
            np.dtype(dtype).name, device, threads,
        )
        super().__init__(("operand", self))

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self._m.shape)  # type: ignore[return-value]


def _execute(target: _Container, assign: str, value: Any) -> None:
    objects: list[Any] = []
    index: dict[int, int] = {}

    def number(tree: tuple) -> tuple:
        if tree[0] == "operand":
            obj = tree[1]
            if isinstance(obj, float):
                objects.append(obj)
                return ("operand", len(objects) - 1)
            key = id(obj)
            if key not in index:
                index[key] = len(objects)
                objects.append(obj._c if isinstance(obj, _Container) else obj._m)
            return ("operand", index[key])
        if tree[0] == "modifier":
            return (tree[0], tree[1], tree[2], number(tree[3]))
        return (tree[0], *[number(t) for t in tree[1:]])

    target_index = number(target._tree)[1]
    tree = number(_tree(value))
    _linalg.execute(target_index, assign, tree, objects)


def _unary(name: str) -> Callable[[Any], Expr]:
    def f(a: Any) -> Expr:
        return Expr((name, _tree(a)))

    f.__name__ = name
    f.__doc__ = f"""Element-wise {name} of an expression (norm_2: the Euclidean norm, a scalar).

    Example::

        >>> import numpy as np
        >>> from molaccel import linalg
        >>> x = linalg.Vector(np.array([1.0, 4.0]))
        >>> x[:] = linalg.{name}(x)
    """
    return f


def _binary(name: str, what: str) -> Callable[[Any, Any], Expr]:
    def f(a: Any, b: Any) -> Expr:
        return Expr((name, _tree(a), _tree(b)))

    f.__name__ = name
    f.__doc__ = f"""{what}

    Example::

        >>> import numpy as np
        >>> from molaccel import linalg
        >>> x = linalg.Vector(np.array([1.0, 4.0])); y = linalg.Vector(np.array([2.0, 2.0]))
        >>> r = linalg.{name}(x, y)
    """
    return f


exp, log, sqrt, abs, sin, cos, tanh, nonzero, norm_2 = (
    _unary(n) for n in ("exp", "log", "sqrt", "abs", "sin", "cos", "tanh", "nonzero", "norm_2")
)
element_prod = _binary("element_prod", "Element-wise product a * b of two vectors.")
element_div = _binary("element_div", "Element-wise quotient a / b of two vectors.")
max = _binary("max", "Element-wise maximum.")
min = _binary("min", "Element-wise minimum.")
pow = _binary("pow", "Element-wise a ** b.")
safe_div = _binary("safe_div", "a / b, or 0 where b == 0.")
greater = _binary("greater", "1 where a > b, else 0.")
inner_prod = _binary("inner_prod", "The inner product of two vectors (a scalar).")
prod = _binary("prod", "Matrix-vector product prod(A, x) (also A @ x).")


class elementwise:
    """An element-wise function from an expression in X (numbers, X, + - * /, parentheses and
    the functions exp log sqrt abs sin cos tanh max min pow ...): C++'s MOLACCEL_EW_MODIFIER.

    Example::

        >>> import numpy as np
        >>> from molaccel import linalg
        >>> F = linalg.elementwise("F", "1/(1+X)")
        >>> x = linalg.Vector(np.array([0.0, 1.0]))
        >>> x[:] = F(x)
        >>> x.to_numpy().tolist()
        [1.0, 0.5]
    """

    def __init__(self, name: str, body: str) -> None:
        if not name.isidentifier():
            raise ValueError(f"a modifier's name must be an identifier (got {name!r})")
        self.name, self.body = name, body

    def __call__(self, argument: Any) -> Expr:
        return Expr(("modifier", self.name, self.body, _tree(argument)))
