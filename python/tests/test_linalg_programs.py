"""molaccel.linalg.Program: whole iterative methods written in Python, against NumPy's
statement-by-statement evaluation, the C++ methods and the CLI."""

from __future__ import annotations

import numpy as np
import pytest

import molaccel
from molaccel import linalg

from helpers import DATA, THREADS, cli


def dense(a: linalg.CSR) -> np.ndarray:
    m = np.zeros(a.shape)
    for r in range(a.shape[0]):
        for k in range(a.indptr[r], a.indptr[r + 1]):
            m[r, a.indices[k]] += a.data[k]
    return m


def python_cg() -> linalg.Program:
    p = linalg.Program("python_cg")
    x, r, d, q, b = (p.vector(n) for n in ("x", "r", "d", "q", "b"))
    alpha, rr, rr_old, bound = (p.scalar(n) for n in ("alpha", "rr", "rr_old", "bound"))
    A = p.matrix("A")
    p.setup(r.set(b), d.set(b)).setup(rr.set(linalg.inner_prod(b, b)))
    p.step(q.set(A @ d))
    p.step(alpha.set(rr / linalg.inner_prod(d, q)), rr_old.set(rr))
    p.step(x.add(alpha * d), r.sub(alpha * q))
    p.step(rr.set(linalg.inner_prod(r, r)))
    p.step(d.set(r + (rr / rr_old) * d))
    p.stop_when(1 - linalg.greater(rr, bound), "converged")
    p.monitor(linalg.sqrt(rr))
    return p


def test_cg_written_in_python_solves_poisson():
    a = linalg.poisson_2d(20)
    b = a @ np.ones(a.shape[0])
    p = python_cg()
    r = p.run(a, vectors={"b": b}, scalars={"bound": 1e-20 * (b @ b)}, device="cpu", threads=THREADS)
    assert r.status == "converged"
    # The recomputed residual: the recurrence's 1e-10 plus the drift of its updates.
    assert np.linalg.norm(b - a @ r.vectors["x"]) <= 1e-9 * np.linalg.norm(b)
    assert len(r.monitor_history[0]) == r.iterations + 1
    assert r.monitor_history[0][-1] <= 1e-10 * np.linalg.norm(b)
    # The planner: this textbook order needs 3 barriers (after q = A d's inputs, and after each
    # inner product); the library's CG recomputes d inside the product and needs 2.
    assert p.barriers_per_iteration == 3
    assert linalg.method_program("cg").barriers_per_iteration == 2
    assert "cpu" in r.kernel
    # The same statements as the library's CG program: the same iterations, values to rounding
    # (the library's program orders its steps differently).
    want = linalg.method_program("cg").run(a, vectors={"b": b}, scalars={"bound": 1e-20 * (b @ b)}, device="cpu",
                                           threads=THREADS)
    assert abs(want.iterations - r.iterations) <= 1
    assert np.allclose(want.vectors["x"], r.vectors["x"], rtol=0, atol=1e-8)


def test_a_program_matches_numpy_statement_by_statement():
    # Simultaneous statements (a swap), products of vectors written in the same iteration, scalar
    # statements with and without reductions, a modifier, += and -=.
    rng = np.random.default_rng(7)
    a = linalg.poisson_2d(7)
    n = a.shape[0]
    A = dense(a) / 8  # |row sum| <= 1: values stay bounded over the iterations
    scaled = linalg.CSR(a.data / 8, a.indices, a.indptr, a.shape)
    u0, v0, w0 = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)

    p = linalg.Program("mixed")
    u, v, w = p.vector("u"), p.vector("v"), p.vector("w")
    s, t, c = p.scalar("s"), p.scalar("t"), p.scalar("c")
    M = p.matrix("M")
    damp = linalg.elementwise("damp", "X / (1 + X * X)")
    p.setup(c.set(linalg.norm_2(u)))
    p.step(u.set(M @ v - 0.5 * w), t.set(linalg.inner_prod(v, w) / (1 + c * c)))
    p.step(v.set(w), w.set(v))
    p.step(w.add(t * damp(u)), s.set(linalg.cos(t) + c))
    p.step(v.sub(0.25 * (M @ w)), c.set(linalg.inner_prod(u, u) / n))
    iterations = 9
    r = p.run(scaled, vectors={"u": u0, "v": v0, "w": w0}, max_iterations=iterations, device="cpu",
              threads=THREADS)
    assert r.status == "iteration limit" and r.iterations == iterations

    U, V, W = u0.copy(), v0.copy(), w0.copy()
    C = np.sqrt(U @ U)
    S = T = 0.0
    for _ in range(iterations):
        U, T = A @ V - 0.5 * W, (V @ W) / (1 + C * C)
        V, W = W.copy(), V.copy()
        W, S = W + T * (U / (1 + U * U)), np.cos(T) + C
        V, C = V - 0.25 * (A @ W), (U @ U) / n
    # The same arithmetic in another summation order (the CPU loops sum in chunks) and with
    # contractions: relative 1e-12 of the largest value (they grow to ~30 in 9 iterations).
    for name, want in (("u", U), ("v", V), ("w", W)):
        assert np.allclose(r.vectors[name], want, rtol=0, atol=1e-12 * np.abs(want).max()), name
    for name, want in (("s", S), ("t", T), ("c", C)):
        assert r.scalars[name] == pytest.approx(want, rel=1e-12, abs=1e-12), name


def test_stop_tests_and_monitors_run_after_every_iteration():
    p = linalg.Program("count")
    x = p.vector("x")
    k = p.scalar("k")
    p.step(x.add(1.0), k.add(1))
    p.stop_when(linalg.greater(k, 4.5), "five")
    p.monitor(k * 10)
    r = p.run(vectors={"x": np.zeros(3)}, device="cpu")
    assert r.status == "five" and r.iterations == 5
    assert r.vectors["x"].tolist() == [5.0, 5.0, 5.0]
    assert r.monitor_history[0].tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    assert p.barriers_per_iteration == 1


def test_methods_and_pipelined_solvers():
    a = linalg.read_matrix_market(DATA / "linalg" / "1138_bus.mtx")
    poisson = linalg.poisson_2d(24)
    barriers = {"cg": 2, "bicgstab": 3, "pipelined_cg": 1, "pipelined_bicgstab": 2, "one_barrier_bicgstab": 1}
    for name, count in barriers.items():
        assert linalg.method_program(name).barriers_per_iteration == count
    for solver in ("pipelined_cg", "pipelined_bicgstab"):
        r = linalg.solve(poisson, solver=solver, device="cpu", threads=THREADS)
        assert r.converged, solver
        assert np.allclose(r.x, 1.0, atol=1e-6)
        assert len(r.residual_history) == r.iterations + 1
    # 1138_bus (condition number ~1e7): pipelined CG converges later than CG (the drift of its
    # extra recurrences: docs/linalg.md) but converges, its true residual within 10x the tolerance.
    b = a @ np.ones(a.shape[0])
    r = linalg.solve(a, b, solver="pipelined_cg", max_iterations=6000, device="cpu", threads=THREADS)
    assert r.converged
    assert np.linalg.norm(b - a @ r.x) <= 1e-7 * np.linalg.norm(b)


def test_pipelined_solver_matches_the_cli(tmp_path):
    cli("linalg", "solve", "--poisson", 16, "--solver", "pipelined-cg", "-o", tmp_path / "x.mtx", "--device", "cpu",
        "--threads", THREADS)
    want = linalg.read_matrix_market_vector(tmp_path / "x.mtx")
    r = linalg.solve(linalg.poisson_2d(16), solver="pipelined_cg", device="cpu", threads=THREADS)
    assert np.array_equal(r.x, want)


def test_float32_programs():
    a = linalg.poisson_2d(10)
    b = a @ np.ones(a.shape[0])
    p = linalg.method_program("cg", dtype=np.float32)
    assert p.dtype == np.float32
    r = p.run(a, vectors={"b": b}, scalars={"bound": 1e-10 * (b @ b)}, device="cpu")
    assert r.status == "converged"
    assert np.allclose(r.vectors["x"], 1.0, atol=1e-3)
    r64 = linalg.solve(a, b, solver="pipelined_cg", precision="fp32", tol=1e-5, device="cpu")
    assert r64.converged


def test_program_errors():
    p = linalg.Program("bad")
    x, y = p.vector("x"), p.vector("y")
    s = p.scalar("s")
    A = p.matrix("A")
    other = linalg.Program("other").vector("z")
    with pytest.raises(TypeError, match="other"):
        p.step(x.set(other))
    with pytest.raises(TypeError, match="symbol.set"):
        p.step("x = y")
    with pytest.raises(TypeError):
        A.set(x)
    with pytest.raises(TypeError):
        p.step(x.set(linalg.Vector(np.ones(2))))
    with pytest.raises(molaccel.Error, match="inner product"):
        p.step(x.set(linalg.inner_prod(x, y) * y))
    with pytest.raises(molaccel.Error, match="twice"):
        p.vector("x")
    with pytest.raises(molaccel.Error, match="one matrix"):
        p.matrix("B")
    p.step(s.set(linalg.inner_prod(x, y)))
    with pytest.raises(molaccel.Error, match="wrong length|elements"):
        p.run(linalg.poisson_2d(3), vectors={"x": np.ones(4)}, device="cpu")
    with pytest.raises(molaccel.Error):
        p.run(linalg.poisson_2d(3), vectors={"nope": np.ones(9)}, device="cpu")
    with pytest.raises(molaccel.InputError):
        linalg.method_program("gmres")
    with pytest.raises(molaccel.InputError, match="unpreconditioned"):
        linalg.solve(linalg.poisson_2d(4), solver="pipelined_cg", preconditioner="jacobi", device="cpu")
    assert "__global__" in linalg.method_program("pipelined_cg").cuda_source()


def test_nested_products_and_the_transposed_product():
    # w = A (u - 0.5 A u) recomputes A u at other rows (no barrier); h = A^T u before the setup.
    a = linalg.read_matrix_market(DATA / "linalg" / "1138_bus.mtx")
    data = a.data.copy()
    rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    k = int(np.nonzero(a.indices != rows)[0][0])  # an entry off the diagonal
    data[k] += 0.25  # not symmetric: A^T differs from A
    a = linalg.CSR(data, a.indices, a.indptr, a.shape)
    m = dense(a)
    p = linalg.Program("nested")
    u, w, h = (p.vector(n) for n in ("u", "w", "h"))
    A = p.matrix("A")
    p.transposed_product(h, u)
    p.step(w.set(A @ (u - 0.5 * (A @ u))))
    assert p.barriers_per_iteration == 1
    rng = np.random.default_rng(5)
    uv = rng.uniform(-1, 1, m.shape[0])
    r = p.run(a, vectors={"u": uv}, max_iterations=1, device="cpu", threads=THREADS)
    assert np.allclose(r.vectors["w"], m @ (uv - 0.5 * (m @ uv)), atol=1e-9)
    assert np.allclose(r.vectors["h"], m.T @ uv, atol=1e-12)
    with pytest.raises(ValueError):
        p.transposed_product(h, p.scalar("s"))
    b = m @ np.ones(m.shape[0])
    one = linalg.method_program("one_barrier_bicgstab").run(
        a, vectors={"b": b}, scalars={"bound": 1e-16 * (b @ b)}, max_iterations=6000, device="cpu", threads=THREADS
    )
    assert one.status == "converged"
    assert np.linalg.norm(b - m @ one.vectors["x"]) <= 1e-7 * np.linalg.norm(b)


def test_jacobi_methods_and_the_inverse_diagonal():
    # d = 1 / diag(A) from the matrix (1 where the diagonal is missing); Jacobi CG as solve().
    p = linalg.Program("inverse")
    d, w = p.vector("d"), p.vector("w")
    p.matrix("A")
    p.inverse_diagonal(d)
    p.step(w.set(2.0 * d))
    a = linalg.CSR(np.array([2.0, 1.0, 3.0, 1.0, -4.0]), np.array([0, 1, 2, 0, 2]), np.array([0, 2, 3, 5]), (3, 3))
    r = p.run(a, max_iterations=1, device="cpu", threads=THREADS)
    assert np.array_equal(r.vectors["w"], [1.0, 2.0, -0.5])
    with pytest.raises(ValueError):
        p.inverse_diagonal(p.scalar("s"))
    bus = linalg.read_matrix_market(DATA / "linalg" / "1138_bus.mtx")
    m = dense(bus)
    b = m @ np.ones(m.shape[0])
    cg = linalg.method_program("cg", preconditioner="jacobi")
    assert cg.name == "jacobi_cg" and cg.barriers_per_iteration == 2
    got = cg.run(bus, vectors={"b": b}, scalars={"bound": 1e-16 * (b @ b)}, max_iterations=5000, device="cpu",
                 threads=THREADS)
    assert got.status == "converged"
    assert np.linalg.norm(b - m @ got.vectors["x"]) <= 1e-7 * np.linalg.norm(b)
    hand = linalg.solve(bus, b, solver="cg", preconditioner="jacobi", tol=1e-8, max_iterations=5000, device="cpu")
    assert abs(got.iterations - hand.iterations) <= 0.05 * hand.iterations
    with pytest.raises(molaccel.InputError, match="unpreconditioned"):
        linalg.method_program("pipelined_cg", preconditioner="jacobi")
    with pytest.raises(molaccel.InputError):
        linalg.method_program("cg", preconditioner="ilu")


def test_generated_launch_through_solve():
    # CG and BiCGStab (Jacobi too) as their programs: the same iterations as solve()'s own.
    a = linalg.poisson_2d(20)
    for solver in ("cg", "bicgstab"):
        for pre in ("none", "jacobi"):
            plain = linalg.solve(a, solver=solver, preconditioner=pre, device="cpu", threads=THREADS)
            got = linalg.solve(a, solver=solver, preconditioner=pre, launch="generated", device="cpu",
                               threads=THREADS)
            assert got.converged and np.allclose(got.x, 1.0, atol=1e-6)
            assert abs(got.iterations - plain.iterations) <= max(2, 0.05 * plain.iterations)
            assert ("jacobi_" in got.backend) == (pre == "jacobi")
    with pytest.raises(molaccel.InputError):
        linalg.solve(a, launch="programs", device="cpu")
