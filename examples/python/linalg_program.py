"""A solver written in Python as a program: the Chebyshev iteration, which needs no inner product
to advance (only the residual norm, for the stop test), so the generator plans it with one
grid-wide barrier per iteration and runs the whole solve as one kernel on a GPU (one fused loop
per step on the CPU). Chebyshev needs bounds [lo, hi] on A's eigenvalues; for the 2-D Poisson
matrix they are known: 8 sin^2(pi / (2 (N + 1))) and 8 cos^2(pi / (2 (N + 1))).

Its attainable accuracy: the residual is updated by recurrence (r -= A d), so, as for CG, the true
residual stalls near machine precision times the condition number times ||x||; with exact bounds the
error falls like 2 ((sqrt(k) - 1) / (sqrt(k) + 1))^m, CG's worst-case rate, k = hi / lo."""

import math

import numpy as np

from molaccel import linalg

N = 48
A = linalg.poisson_2d(N)
b = A @ np.ones(A.shape[0])
lo, hi = 8 * math.sin(math.pi / (2 * (N + 1))) ** 2, 8 * math.cos(math.pi / (2 * (N + 1))) ** 2

p = linalg.Program("chebyshev")
x, r, d, rhs = (p.vector(n) for n in ("x", "r", "d", "b"))
theta, delta, rho, rho_new, rr, bound = (p.scalar(n) for n in ("theta", "delta", "rho", "rho_new", "rr", "bound"))
M = p.matrix("A")
p.setup(r.set(rhs), d.set(rhs / theta), rho.set(delta / theta), rr.set(linalg.inner_prod(rhs, rhs)))
p.step(x.add(d), r.sub(M @ d))
p.step(rho_new.set(1 / (2 * theta / delta - rho)))
p.step(d.set(rho_new * rho * d + (2 * rho_new / delta) * r), rr.set(linalg.inner_prod(r, r)))
p.step(rho.set(rho_new))
p.stop_when(linalg.greater(bound, rr), "converged")
p.monitor(linalg.sqrt(rr))

tol = 1e-8
result = p.run(A, vectors={"b": b},
               scalars={"theta": (hi + lo) / 2, "delta": (hi - lo) / 2, "bound": tol ** 2 * (b @ b)},
               max_iterations=5000)
residual = np.linalg.norm(b - A @ result.vectors["x"]) / np.linalg.norm(b)
cg = linalg.solve(A, b, solver="cg", tol=tol)
print(f"Chebyshev on Poisson {N} x {N}: {result.status} after {result.iterations} iterations "
      f"({p.barriers_per_iteration} barrier per iteration, {result.kernel}), ||b - Ax|| / ||b|| = {residual:.1e}; "
      f"CG: {cg.iterations} iterations")
assert result.status == "converged" and residual < 10 * tol
assert p.barriers_per_iteration == 1
