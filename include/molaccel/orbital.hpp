// molaccel orbital engine: molecular orbitals and electron densities on grids (VMD's MO work).
//
// Conventions (all public values are in atomic units, bohr, unless a name says otherwise):
//  * Basis functions are contracted Gaussians, Cartesian or spherical (pure), l = 0..6 (s..i).
//    Inside a shell the functions are in Molden order: Cartesian d = xx yy zz xy xz yz,
//    f = xxx yyy zzz xyy xxy xxz xzz yzz yyz xyz, g = xxxx yyyy zzzz xxxy xxxz yyyx yyyz zzzx zzzy
//    xxyy xxzz yyzz xxyz yyxz zzxy; h and i (not defined by the Molden format) in Gaussian's order,
//    x power ascending, then y: zzzzz yzzzz yyzzz ... xxxxy xxxxx; spherical m = 0, +1, -1, +2,
//    -2, ... (real solid harmonics without the Condon-Shortley phase). Readers of other orders
//    (fchk) reorder to this one.
//  * After reading, every basis function is normalised to unit self-overlap and the MO
//    coefficients refer to those functions (the normalisation check finds and applies the writer's
//    convention, see NormalisationReport).
//  * Grids follow the Gaussian cube layout: point (i, j, k) at origin + i*axis[0] + j*axis[1] +
//    k*axis[2]; values are stored with k fastest: value[(i * n[1] + j) * n[2] + k].
#pragma once

#include <array>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel::orbital {

inline constexpr double bohr_in_angstrom = 0.52917721067;  // CODATA 2014, as in Psi4 and VMD
inline constexpr int max_angular_momentum = 6;             // i functions

struct Atom {
  int atomic_number = 0;
  std::string label;                 // element symbol or label as written in the file
  std::array<double, 3> position{};  // bohr
  double charge = 0;                 // nuclear charge used by the file (ECP files differ from Z)
};

struct Shell {
  int atom = 0;                      // index into Wavefunction::atoms
  int l = 0;                         // angular momentum
  bool pure = false;                 // spherical (2l+1 functions) or Cartesian ((l+1)(l+2)/2 functions)
  std::vector<double> exponents;     // bohr^-2
  std::vector<double> coefficients;  // contraction coefficients as written (normalised primitives)
  int function_count() const { return pure ? 2 * l + 1 : (l + 1) * (l + 2) / 2; }
};

struct OrbitalSet {
  std::vector<double> energies;     // hartree, one per orbital
  std::vector<double> occupations;  // electrons, one per orbital
  std::vector<std::string> symmetries;
  // coefficients[orbital * function_count + function], functions in basis order.
  std::vector<double> coefficients;
  std::size_t count() const { return energies.size(); }
};

// What the normalisation check found: max |C^T S C - I| over the orbitals before and after the
// writer fix that was applied ("none" when the file was already orthonormal).
struct NormalisationReport {
  std::string fix = "none";
  std::string fix_description;
  double deviation_as_read = 0;
  double deviation_after_fix = 0;
  std::vector<std::string> tried;  // fixes tried, in order, with their deviation
};

struct Wavefunction {
  std::string source;  // path of the file
  std::string format;  // "molden" or "fchk"
  std::string writer;  // program that wrote it when recognisable ("Psi4", "ORCA", ...) or ""
  std::vector<Atom> atoms;
  std::vector<Shell> shells;
  OrbitalSet alpha;
  OrbitalSet beta;  // empty (count() == 0) for restricted wavefunctions
  NormalisationReport normalisation;

  int function_count() const;
  bool unrestricted() const { return beta.count() > 0; }
  double electron_count() const;  // sum of occupations
};

struct ReadOptions {
  bool check_normalisation = true;  // compute S, check C^T S C = I, apply a writer fix if needed
  // Largest |C^T S C - I| accepted: writers that print 6-7 decimals reach ~1e-5; convention errors
  // give 1e-2 and more.
  double orthonormality_tolerance = 1e-4;
};

// Readers; throw InputError(path, line, message) on bad or truncated input.
Wavefunction read_molden(const std::filesystem::path& path, const ReadOptions& options = {});
Wavefunction read_molden_text(std::string_view name, std::string_view content,
                              const ReadOptions& options = {});
Wavefunction read_fchk(const std::filesystem::path& path, const ReadOptions& options = {});
Wavefunction read_fchk_text(std::string_view name, std::string_view content, const ReadOptions& options = {});
// Picks the reader by content (fchk files start with a title line, then a line with the job type;
// Molden files with "[Molden Format]"), reading plain or gzip files.
Wavefunction read_wavefunction(const std::filesystem::path& path, const ReadOptions& options = {});

// The overlap matrix of the (unit-normalised) basis functions, row-major n x n.
std::vector<double> overlap_matrix(const Wavefunction& wavefunction);
// max |C^T S C - I| over the given orbital set.
double orthonormality_deviation(const Wavefunction& wavefunction, const OrbitalSet& orbitals);
// Runs the normalisation check and applies a writer fix; throws InputError when none works.
void check_and_fix_normalisation(Wavefunction& wavefunction, double tolerance = 1e-4);

// ---------------------------------------------------------------------------------------------
// Orbitals by name.
// ---------------------------------------------------------------------------------------------
enum class Spin { alpha, beta };

struct OrbitalRef {
  Spin spin = Spin::alpha;
  std::size_t index = 0;  // 0-based within its spin set
};

// Accepts "homo", "lumo", "homo-2", "lumo+1", a 1-based index "12", each optionally prefixed by
// "alpha:" / "beta:" (or "a:" / "b:"). HOMO is the highest orbital with occupation > 0.
OrbitalRef parse_orbital(std::string_view text, const Wavefunction& wavefunction);
std::string describe_orbital(const OrbitalRef& ref, const Wavefunction& wavefunction);
// Several orbitals: "all" (every orbital of the spin set), a range "FROM:TO" of two names
// ("homo-5:lumo+5", "3:12"; both ends included, in energy order), or one name as parse_orbital;
// each optionally prefixed "alpha:" / "beta:" ("beta:homo-1:lumo"). Ranges and "all" come in
// energy order.
std::vector<OrbitalRef> parse_orbital_selection(std::string_view text, const Wavefunction& wavefunction);

// ---------------------------------------------------------------------------------------------
// Trajectories: one wavefunction per frame (an MD or IRC run).
// ---------------------------------------------------------------------------------------------
// Throws InputError naming the first frame (its file) whose atoms (count, elements), basis set
// (shells, exponents, contraction) or spin treatment differ from frame 1's.
void check_same_system(const std::vector<Wavefunction>& frames);

struct TrackedOrbital {
  OrbitalRef ref;             // the orbital in this frame
  double overlap = 1;         // |<previous frame's orbital | this one>|
  bool sign_flipped = false;  // draw this frame's orbital negated, for sign continuity
};
// Follows `start` (an orbital of frame 1) through the frames by maximum overlap: in each frame the
// orbital of the same spin with the largest |<followed | candidate>|, the overlap taken between
// the previous frame's basis functions at their positions and this frame's (so moving atoms are
// accounted for), and its sign flipped where that overlap is negative. Checks the frames first.
std::vector<TrackedOrbital> track_orbital(const std::vector<Wavefunction>& frames, OrbitalRef start);

// ---------------------------------------------------------------------------------------------
// Grids.
// ---------------------------------------------------------------------------------------------
struct GridSpec {
  std::array<double, 3> origin{};               // bohr
  std::array<std::array<double, 3>, 3> axes{};  // step vectors, bohr
  std::array<std::size_t, 3> counts{};          // points along each axis
  std::size_t point_count() const { return counts[0] * counts[1] * counts[2]; }
  double voxel_volume() const;  // bohr^3
};

// Box around the atoms plus `padding`, with `spacing` between points (both in angstrom).
GridSpec automatic_grid(const Wavefunction& wavefunction, double padding_angstrom = 3.0,
                        double spacing_angstrom = 0.1);
// Orthogonal grid from an origin, a size and a spacing (angstrom).
GridSpec explicit_grid(std::array<double, 3> origin_angstrom, std::array<double, 3> size_angstrom,
                       double spacing_angstrom);
// The grid of an existing cube file.
GridSpec grid_of_cube(const std::filesystem::path& cube_path);

// ---------------------------------------------------------------------------------------------
// Evaluation.
// ---------------------------------------------------------------------------------------------
enum class Backend {
  automatic,     // cuda (jit) when the resources have a GPU, else cpu
  reference,     // double precision, primitive by primitive, no screening (the oracle; slow)
  cpu,           // fp32, vectorised and threaded, distance screening
  cuda_generic,  // GPU kernel with the basis set in shared memory
  cuda_jit,      // GPU kernel generated for this basis set and compiled with NVRTC
};
std::string_view to_string(Backend backend);
Backend parse_backend(std::string_view text);  // throws InputError("--backend", 0, ...)

struct EvaluateOptions {
  Backend backend = Backend::automatic;
  // Screening: a primitive is skipped at a point where |coefficient * polynomial * exp| is below
  // this, relative to the largest MO coefficient (so the absolute error per point stays below
  // tolerance * largest |C| * number of primitives). 0 disables screening.
  double screening_tolerance = 1e-9;
  // Grid planes per scheduler tile (0 = chosen by backend: on GPUs the chunk pool, one share per
  // worker claiming chunks of planes fixed by the request; see docs/orbital.md, Scheduling).
  std::size_t planes_per_tile = 0;
  // Tests: forwarded to the scheduler (JobOptions::inject_fault) to make tiles fail. With the GPU
  // chunk pool the tiles are the workers' shares (0 .. workers-1) and the hook is also asked for
  // each chunk c a share claims, as tile workers + c (attempt = earlier claims of that chunk).
  std::function<bool(const WorkerInfo&, std::size_t tile, int attempt)> inject_fault;
};

struct EvaluationInfo {
  std::string backend;       // what ran, e.g. "cpu/avx2", "cuda_jit", "reference"
  double seconds = 0;        // wall time of the evaluation
  double exp_per_point = 0;  // primitive exponentials evaluated per point after screening
  double exp_per_point_unscreened = 0;
  JobStats job;
};

// Values of the orbitals: result[o * grid.point_count() + p].
std::vector<float> evaluate_orbitals(const Resources& resources, const Wavefunction& wavefunction,
                                     const GridSpec& grid, const std::vector<OrbitalRef>& orbitals,
                                     const EvaluateOptions& options = {}, EvaluationInfo* info = nullptr);

// The same into a caller's buffer: out[o * grid.point_count() + p], size >= orbitals x points
// (every value is written). For repeated evaluations into one buffer (no allocation and no page
// faults per call: the multi-GPU batch benchmark uses it); throws Error when the buffer is short.
void evaluate_orbitals_into(const Resources& resources, const Wavefunction& wavefunction,
                            const GridSpec& grid, const std::vector<OrbitalRef>& orbitals, float* out,
                            std::size_t size, const EvaluateOptions& options = {},
                            EvaluationInfo* info = nullptr);

enum class DensityKind { total, spin, alpha, beta };
std::string_view to_string(DensityKind kind);
// Electron density sum_i occ_i |psi_i|^2 (spin: alpha minus beta) on the grid.
std::vector<float> evaluate_density(const Resources& resources, const Wavefunction& wavefunction,
                                    const GridSpec& grid, DensityKind kind = DensityKind::total,
                                    const EvaluateOptions& options = {}, EvaluationInfo* info = nullptr);
// The same into a caller's buffer of size >= grid.point_count() (every value is written).
void evaluate_density_into(const Resources& resources, const Wavefunction& wavefunction, const GridSpec& grid,
                           DensityKind kind, float* out, std::size_t size,
                           const EvaluateOptions& options = {}, EvaluationInfo* info = nullptr);

// ---------------------------------------------------------------------------------------------
// Cube files.
// ---------------------------------------------------------------------------------------------
struct Cube {
  std::vector<Atom> atoms;
  GridSpec grid;
  std::vector<int> orbital_ids;  // non-empty for multi-orbital cubes (negative atom count)
  std::vector<double> values;    // grid.point_count() * max(1, orbital_ids.size()), orbital fastest
  std::string comment1, comment2;
};
Cube read_cube(const std::filesystem::path& path);  // plain or gzip
Cube read_cube_text(std::string_view name, std::string_view content);
// One field per cube; `values` has grid.point_count() entries. Written atomically.
void write_cube(const std::filesystem::path& path, const Wavefunction& wavefunction, const GridSpec& grid,
                const float* values, std::string_view title, std::string_view description);
// Several orbitals in one cube (Gaussian's multi-orbital format, orbital index fastest).
void write_multi_orbital_cube(const std::filesystem::path& path, const Wavefunction& wavefunction,
                              const GridSpec& grid, const std::vector<float>& values,
                              const std::vector<int>& orbital_numbers, std::string_view title);

}  // namespace molaccel::orbital
