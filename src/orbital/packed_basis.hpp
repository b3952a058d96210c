// The basis set as the fast backends (cpu, cuda generic, cuda JIT) use it: Cartesian shells grouped
// by atom, fp32 primitives with screening radii, and MO coefficients folded into per-component
// Cartesian coefficients (spherical-to-Cartesian transform and normalisation included), so a
// kernel only evaluates sum_c C_c x^i y^j z^k * sum_p d_p exp(-a_p r^2). Device-agnostic.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "molaccel/orbital.hpp"

namespace molaccel::orbital::detail {

struct ExpandedShell;  // basis_functions.hpp

struct PackedShell {
  int l = 0;
  int first_primitive = 0;
  int primitive_count = 0;
  int first_component = 0;  // column in the Cartesian coefficient matrix
  float cutoff_r2 = 0;      // largest primitive cutoff: beyond it the whole shell is skipped
};

// CPU kernel: the primitives of one atom that share an exponent (Pople sp shells, or an s and a p
// shell with the same single exponent) need one exp() per point: one group per distinct exponent.
struct ExponentGroup {
  float exponent = 0;
  float cutoff_r2 = 0;  // largest cutoff_r2 of its primitives
};

struct PackedBasis {
  std::vector<double> atom_xyz;       // 3 per atom, bohr
  std::vector<int> atom_first_shell;  // n_atoms + 1 offsets into shells
  std::vector<PackedShell> shells;    // grouped by atom
  std::vector<float> exponent;        // per primitive, bohr^-2
  std::vector<float> coefficient;     // per primitive: contraction coefficient x radial norm
  std::vector<float> cutoff_r2;       // per primitive: skipped where r^2 >= cutoff_r2
  int components = 0;                 // Cartesian components (coefficient matrix columns)
  int max_l = 0;
  // CPU layout: per atom, its distinct exponents sorted by decreasing cutoff_r2 (the groups within
  // reach of a point are a prefix), the group of each primitive (index from the atom's first
  // group), and the atom's largest cutoff.
  std::vector<int> atom_first_group;  // n_atoms + 1 offsets into groups
  std::vector<ExponentGroup> groups;
  std::vector<int> primitive_group;  // per primitive
  std::vector<float> atom_cutoff_r2;
  std::size_t atom_count() const { return atom_first_shell.empty() ? 0 : atom_first_shell.size() - 1; }
};

// `tolerance`: absolute bound on a skipped primitive's |d_p r^l exp(-a r^2)| times the largest
// angular weight of its shell (0 = no screening).
PackedBasis pack_basis(const Wavefunction& wfn, double tolerance);
// The same from shells already expanded (expand_shells(wfn)), so that a request expands them once.
PackedBasis pack_basis(const Wavefunction& wfn, const std::vector<ExpandedShell>& expanded, double tolerance);

// Cartesian coefficients of the selected orbitals: values[o * components + c].
std::vector<float> cartesian_coefficients(const Wavefunction& wfn, const std::vector<OrbitalRef>& orbitals);
std::vector<float> cartesian_coefficients(const Wavefunction& wfn, const std::vector<ExpandedShell>& expanded,
                                          const std::vector<OrbitalRef>& orbitals);

// Orbitals and weights whose weighted squares sum to the requested density.
struct DensityTerms {
  std::vector<OrbitalRef> orbitals;
  std::vector<float> weights;
};
DensityTerms density_terms(const Wavefunction& wfn, DensityKind kind);

// Largest |MO coefficient| over the selected orbitals (scales the screening tolerance).
double largest_coefficient(const Wavefunction& wfn, const std::vector<OrbitalRef>& orbitals);

// Primitive exponentials per point that screening leaves, estimated on a sub-sample of the grid.
double exp_per_point(const PackedBasis& basis, const GridSpec& grid);

}  // namespace molaccel::orbital::detail
