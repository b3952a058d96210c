"""molaccel.linalg against the CLI: the same solution bits, SciPy and raw CSR input, errors."""

from __future__ import annotations


import numpy as np
import pytest

import molaccel
from molaccel import linalg

from helpers import DATA, THREADS, cli, run_in_threads


def test_poisson_solution_matches_the_cli_bits(tmp_path):
    cli("linalg", "solve", "--poisson", 24, "-o", tmp_path / "x.mtx", "--device", "cpu", "--threads", THREADS)
    want = linalg.read_matrix_market_vector(tmp_path / "x.mtx")  # %.17g: exact round trip
    r = linalg.solve(linalg.poisson_2d(24), device="cpu", threads=THREADS)
    assert r.converged and r.status == "converged"
    assert np.array_equal(r.x, want)
    assert np.allclose(r.x, 1.0, atol=1e-6)


def test_matrix_market_cg_jacobi_matches_the_cli(tmp_path):
    mtx = DATA / "linalg" / "1138_bus.mtx"
    cli("linalg", "solve", mtx, "--solver", "cg", "--precond", "jacobi", "--max-iter", 5000, "-o",
        tmp_path / "x.mtx", "--device", "cpu", "--threads", THREADS)
    want = linalg.read_matrix_market_vector(tmp_path / "x.mtx")
    r = linalg.solve(linalg.read_matrix_market(mtx), solver="cg", preconditioner="jacobi", max_iterations=5000,
                     device="cpu", threads=THREADS)
    assert np.array_equal(r.x, want)
    assert len(r.residual_history) == r.iterations + 1


def test_scipy_and_raw_arrays_give_the_same_solve():
    a = linalg.poisson_2d(12)
    b = np.arange(a.shape[0], dtype=np.float64)
    want = linalg.solve(a, b, device="cpu", threads=THREADS)
    raw = linalg.solve((a.data, a.indices.astype(np.int64), a.indptr), b, device="cpu", threads=THREADS)
    assert np.array_equal(raw.x, want.x)
    try:
        import scipy.sparse  # noqa: F401
    except ImportError:
        return
    s = a.to_scipy()
    assert np.array_equal(linalg.solve(s, b, device="cpu", threads=THREADS).x, want.x)
    assert np.array_equal(linalg.solve(s.tocoo(), b, device="cpu", threads=THREADS).x, want.x)
    assert np.allclose(s @ want.x, b, rtol=1e-6, atol=1e-5)


def test_not_converging_is_a_status_not_an_error():
    r = linalg.solve(linalg.poisson_2d(16), max_iterations=2, device="cpu")
    assert not r.converged and r.status == "max_iterations" and r.iterations == 2


def test_bad_inputs():
    a = linalg.poisson_2d(4)
    with pytest.raises(molaccel.InputError):
        linalg.solve(a, np.ones(3))
    with pytest.raises(molaccel.InputError):
        linalg.solve(linalg.CSR(a.data, a.indices, a.indptr, (16, 17)), np.ones(16))
    unsorted = a.indices.copy()
    unsorted[[0, 1]] = unsorted[[1, 0]]
    with pytest.raises(molaccel.InputError):
        linalg.solve(linalg.CSR(a.data, unsorted, a.indptr, a.shape))
    with pytest.raises(molaccel.InputError):
        linalg.solve(a, solver="gmres")
    with pytest.raises(molaccel.InputError):
        linalg.solve(a, tol=0)
    with pytest.raises(TypeError):
        linalg.solve([[1, 0], [0, 1]])
    with pytest.raises(TypeError):
        linalg.solve((a.data, a.indices.astype(np.float64), a.indptr))


def test_threads_calling_in_parallel_get_the_same_results():
    a = linalg.poisson_2d(20)
    want = linalg.solve(a, device="cpu", threads=1).x
    results = run_in_threads(lambda i: linalg.solve(a, device="cpu", threads=1).x, 4)
    for r in results:
        assert np.array_equal(r, want)


# ---- the expression generator -----------------------------------------------------------------
def _vectors(n=1000, dtype=np.float64, device="cpu"):
    rng = np.random.default_rng(7)
    values = [rng.uniform(-1, 1, n).astype(dtype) for _ in range(3)]
    return values, [linalg.Vector(v, device=device) for v in values]


def test_the_issue_statement_runs_as_one_operation():
    (x0, y0, z0), (x, y, z) = _vectors()
    F = linalg.elementwise("F", "1/(1+X)")
    G = linalg.elementwise("G", "X*X")
    for alpha, beta in ((0.5, 0.25), (2.0, -1.0)):  # numbers are passed by value: one kernel
        x += (alpha + beta) * x - (y - F(G(z)))
        x0 = x0 + (alpha + beta) * x0 - (y0 - 1 / (1 + z0 * z0))
        assert np.allclose(x.to_numpy(), x0, rtol=1e-14, atol=1e-14)


def test_assignments_functions_and_scalars():
    (x0, y0, _), (x, y, _) = _vectors()
    x[:] = linalg.exp(y) - 2.0 * linalg.element_prod(y, y)
    assert np.allclose(x.to_numpy(), np.exp(y0) - 2 * y0 * y0, rtol=1e-14)
    x -= linalg.abs(y) / 4
    assert np.allclose(x.to_numpy(), np.exp(y0) - 2 * y0 * y0 - np.abs(y0) / 4, rtol=1e-14)
    s = linalg.Scalar(0.0, device="cpu")  # where the vectors are: operands share one device
    s[:] = linalg.inner_prod(y, y)
    assert np.isclose(s.value, float(y0 @ y0), rtol=1e-13)
    x.assign(s * y)  # a device scalar in a later kernel, no trip to the host
    assert np.allclose(x.to_numpy(), float(y0 @ y0) * y0, rtol=1e-13)
    x[:] = linalg.max(y, 0.0)
    assert np.array_equal(x.to_numpy(), np.maximum(y0, 0))
    f = linalg.Vector(y0.astype(np.float32))
    f += np.float32(3) * f
    assert f.dtype == np.float32 and np.allclose(f.to_numpy(), 4 * y0.astype(np.float32), rtol=1e-6)


def test_sparse_products_in_expressions():
    a = linalg.poisson_2d(10)
    x0 = np.linspace(0, 1, 100)
    A, x, y = linalg.SparseMatrix(a), linalg.Vector(x0), linalg.Vector(100)
    y[:] = A @ x - 0.5 * x
    assert np.allclose(y.to_numpy(), a @ x0 - 0.5 * x0, rtol=1e-14, atol=1e-14)
    y[:] = linalg.prod(A, x)
    assert np.allclose(y.to_numpy(), a @ x0, rtol=1e-14, atol=1e-14)


def test_containers_exchange_memory_without_copies():
    (_, y0, _), (_, y, _) = _vectors()
    view = np.from_dlpack(y)  # the vector's own memory
    y += 1.0 * y
    assert np.array_equal(view, 2 * y0) and np.array_equal(np.asarray(y), 2 * y0)
    assert y.device == "cpu" and y.__dlpack_device__() == (1, 0)
    with pytest.raises(AttributeError):
        y.__cuda_array_interface__
    with pytest.raises(BufferError):  # DLPack: host memory takes no stream
        y.__dlpack__(stream=1)


def test_expression_errors():
    (_, _, _), (x, y, _) = _vectors(10)
    with pytest.raises(molaccel.Error):
        x[:] = x * y  # vector * vector: element_prod or inner_prod
    with pytest.raises(molaccel.InputError):
        x[:] = linalg.elementwise("H", "1/(1+")(x)
    with pytest.raises(molaccel.Error):
        x[:] = linalg.Vector(11) + y  # sizes differ
    with pytest.raises(TypeError):
        x[:] = y + "1"
    with pytest.raises(TypeError):
        linalg.Vector(np.ones((2, 2)))


def test_threads_running_the_same_statement_on_their_own_vectors():
    rng = np.random.default_rng(3)
    inputs = [rng.uniform(-1, 1, 5000) for _ in range(6)]

    def work(i: int) -> np.ndarray:
        x, y = linalg.Vector(np.zeros(5000)), linalg.Vector(inputs[i])
        for _ in range(20):
            x += 0.5 * y - 0.25 * x
        return x.to_numpy()

    results = run_in_threads(work, 6)
    for i, r in enumerate(results):
        want = np.zeros(5000)
        for _ in range(20):
            want = want + (0.5 * inputs[i] - 0.25 * want)
        assert np.allclose(r, want, rtol=1e-13, atol=1e-15)
