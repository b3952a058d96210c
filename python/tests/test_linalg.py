"""molaccel.linalg against the CLI: the same solution bits, SciPy and raw CSR input, errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import molaccel
from molaccel import linalg

from helpers import DATA, THREADS, cli


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
    results, errors = [None] * 4, []

    def work(i: int) -> None:
        try:
            results[i] = linalg.solve(a, device="cpu", threads=1).x
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        assert np.array_equal(r, want)
