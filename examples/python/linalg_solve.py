"""Krylov solvers from Python: the seed's 2-D Poisson system with BiCGStab, and a Matrix Market
file with Jacobi-preconditioned CG (SciPy matrices work too when SciPy is installed)."""

from pathlib import Path

import numpy as np

from molaccel import linalg

A = linalg.poisson_2d(64)  # 4,096 unknowns; b defaults to A * ones, so x should be all ones
result = linalg.solve(A, solver="bicgstab", tol=1e-10)
print(f"Poisson 64 x 64: {result.status} after {result.iterations} iterations on {result.backend}, "
      f"max |x - 1| = {np.abs(result.x - 1).max():.2e}")
assert result.converged and np.allclose(result.x, 1.0, atol=1e-6)

bus = linalg.read_matrix_market(Path(__file__).resolve().parents[2] / "data" / "linalg" / "1138_bus.mtx")
b = np.ones(bus.shape[0])
result = linalg.solve(bus, b, solver="cg", preconditioner="jacobi", max_iterations=5000)
residual = np.linalg.norm(b - bus @ result.x) / np.linalg.norm(b)
print(f"1138_bus: {result.status} after {result.iterations} iterations, ||b - Ax|| / ||b|| = {residual:.1e}")
assert result.converged and residual < 1e-6

try:
    import scipy.sparse
except ImportError:
    scipy = None
if scipy is not None:
    same = linalg.solve(scipy.sparse.csr_matrix(A.to_scipy()), solver="bicgstab", tol=1e-10)
    assert np.array_equal(same.x, linalg.solve(A, solver="bicgstab", tol=1e-10).x)
