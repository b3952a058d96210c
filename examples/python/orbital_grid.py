"""Orbitals on grids from Python: the HOMO of water as a NumPy array in cube order, its nodal
structure, and the electron density integrated over the grid."""

from pathlib import Path

import numpy as np

from molaccel import orbital

data = Path(__file__).resolve().parents[2] / "data" / "orbital"
wfn = orbital.read(data / "h2o_631gs.molden")
print(f"{wfn.format} file: {len(wfn.atoms['labels'])} atoms, {wfn.function_count} basis functions, "
      f"HOMO = {wfn.describe_orbital('homo')}")

homo = orbital.grid(wfn, "homo", spacing=0.15)  # angstrom in, bohr out (as in cube files)
nx, ny, nz = homo.values.shape
print(f"HOMO on {nx} x {ny} x {nz} points, origin {np.round(homo.origin, 3)} bohr, on {homo.backend}")
norm = float((homo.values.astype(np.float64) ** 2).sum() * homo.voxel_volume)
print(f"integral of |psi|^2 on the grid: {norm:.4f}")
assert abs(norm - 1.0) < 0.01

rho = orbital.density(wfn, spacing=0.1)  # the core density needs the finer (default) spacing
electrons = float(rho.values.sum(dtype=np.float64) * rho.voxel_volume)
print(f"density integral: {electrons:.3f} electrons (file: {wfn.electron_count:.0f})")
assert abs(electrons - wfn.electron_count) < 0.05
