#include "orbital/jit_source.hpp"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <map>

#include "orbital/basis_functions.hpp"

namespace molaccel::orbital::detail {

namespace {

constexpr double kLog2e = 1.4426950408889634;

std::string literal(double value) {
  if (value >= static_cast<double>(FLT_MAX)) return "3.0e38f";
  return fmt::format("{:.9g}f", value);
}

// Cartesian monomial of component c of angular momentum l, e.g. "dx*dx*dy".
std::string monomial(int l, int c) {
  const auto& p = cartesian_powers(l)[static_cast<std::size_t>(c)];
  std::string out;
  auto add = [&](const char* v, int n) {
    for (int i = 0; i < n; ++i) out += (out.empty() ? "" : "*") + std::string(v);
  };
  add("dx", p.x);
  add("dy", p.y);
  add("dz", p.z);
  return out;
}

// A key that identifies atoms whose basis is the same (exponents, coefficients, cutoffs, layout).
std::string atom_type_key(const PackedBasis& basis, std::size_t atom) {
  std::string key;
  const int first = basis.atom_first_shell[atom], last = basis.atom_first_shell[atom + 1];
  const int base = first < last ? basis.shells[static_cast<std::size_t>(first)].first_component : 0;
  for (int s = first; s < last; ++s) {
    const PackedShell& shell = basis.shells[static_cast<std::size_t>(s)];
    key += fmt::format("[{} {} {}", shell.l, shell.first_component - base, shell.primitive_count);
    for (int q = 0; q < shell.primitive_count; ++q) {
      const std::size_t p = static_cast<std::size_t>(shell.first_primitive + q);
      key += fmt::format(" {:a} {:a} {:a}", basis.exponent[p], basis.coefficient[p], basis.cutoff_r2[p]);
    }
    key += "]";
  }
  return key;
}

// One element type's function: PPT points at once (dx[q], dy[q], dz[q], r2[q]); a primitive is
// added at point q only where r2[q] < its cutoff, a shell is entered when any of the points is
// inside its radius. The source of truth of both dialects: CUDA (c in shared memory) and OpenCL C
// (c in global memory; the point arrays are private).
void emit_type_function_points(std::string& src, const PackedBasis& basis, std::size_t atom, int type,
                               int ppt, bool opencl = false) {
  const int first = basis.atom_first_shell[atom], last = basis.atom_first_shell[atom + 1];
  const int base = first < last ? basis.shells[static_cast<std::size_t>(first)].first_component : 0;
  float type_cut = 0;
  for (int s = first; s < last; ++s)
    type_cut = std::max(type_cut, basis.shells[static_cast<std::size_t>(s)].cutoff_r2);
  auto any_inside = [ppt](const std::string& cut) {
    std::string out = "(";
    for (int q = 0; q < ppt; ++q) out += fmt::format("{}r2[{}] < {}", q ? " || " : "", q, cut);
    return out + ")";
  };
  if (opencl)
    src += fmt::format(
        "// element type {}: {} shells, PPT points\n"
        "void evalp_type_{}(const float* dx, const float* dy, const float* dz, const float* r2,\n"
        "                   __global const float* restrict c, float* v) {{\n"
        "  if (!{}) return;\n",
        type, last - first, type, any_inside(literal(type_cut)));
  else
    src += fmt::format(
        "// element type {}: {} shells, PPT points\n"
        "__device__ __forceinline__ void evalp_type_{}(const float* dx, const float* dy, const float* dz, "
        "const float* r2,\n"
        "                                              const float* __restrict__ c, float* v) {{\n"
        "  if (!{}) return;\n",
        type, last - first, type, any_inside(literal(type_cut)));
  for (int s = first; s < last; ++s) {
    const PackedShell& shell = basis.shells[static_cast<std::size_t>(s)];
    const int offset = shell.first_component - base;
    src += fmt::format(
        "  if ({}) {{  // l = {}\n    float R[PPT];\n#pragma unroll\n    for (int q = 0; q < PPT; ++q) {{\n  "
        "    R[q] = 0.0f;\n",
        any_inside(literal(shell.cutoff_r2)), shell.l);
    for (int q = 0; q < shell.primitive_count; ++q) {
      const std::size_t p = static_cast<std::size_t>(shell.first_primitive + q);
      const std::string term = fmt::format("{} * ex2_approx({} * r2[q])", literal(basis.coefficient[p]),
                                           literal(-static_cast<double>(basis.exponent[p]) * kLog2e));
      // One point: inside the shell's radius means inside this primitive's too.
      if (ppt == 1 && basis.cutoff_r2[p] >= shell.cutoff_r2)
        src += fmt::format("      R[q] += {};\n", term);
      else
        src += fmt::format("      if (r2[q] < {}) R[q] += {};\n", literal(basis.cutoff_r2[p]), term);
    }
    std::string angular;
    for (int cc = 0; cc < cartesian_count(shell.l); ++cc) {
      std::string m = monomial(shell.l, cc);
      for (const char* axis : {"dx", "dy", "dz"}) {  // dx -> dx[q]
        std::string replaced;
        for (std::size_t at = 0; at < m.size();) {
          if (m.compare(at, 2, axis) == 0) {
            replaced += std::string(axis) + "[q]";
            at += 2;
          } else {
            replaced += m[at++];
          }
        }
        m = replaced;
      }
      angular += fmt::format("{}c[{}]{}", cc ? " + " : "", offset + cc, m.empty() ? "" : "*" + m);
    }
    src += fmt::format("      v[q] += R[q] * ({});\n    }}\n  }}\n", angular);
  }
  src += "}\n\n";
}

constexpr const char* kPreamble =
    "// Generated by molaccel (orbital JIT): basis set folded into the code.\n"
    "struct OrbitalGridArgs {\n"
    "  double origin[3];\n"
    "  double axes[3][3];\n"
    "  int ny, nz, plane_begin, components;\n"
    "  int planes;  // planes of this launch (bounds of 3-D bricks)\n"
    "};\n"
    "__device__ __forceinline__ float ex2_approx(float x) {\n"
    "  float y;\n"
    "  asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x));\n"
    "  return y;\n"
    "}\n\n";

// Element types: atoms with the same basis share one; returns one representative atom per type.
std::vector<std::size_t> classify_atoms(const PackedBasis& basis, JitSource& out) {
  std::map<std::string, int> types;
  std::vector<std::size_t> representative;
  out.atom_type.resize(basis.atom_count());
  for (std::size_t a = 0; a < basis.atom_count(); ++a) {
    const std::string key = atom_type_key(basis, a);
    auto [it, inserted] = types.emplace(key, static_cast<int>(representative.size()));
    if (inserted) representative.push_back(a);
    out.atom_type[a] = it->second;
  }
  out.type_count = static_cast<int>(representative.size());
  return representative;
}

}  // namespace

std::string CullLayout::name() const {
  return points_per_thread == 1 ? fmt::format("{}x{}x{}", bx, by, bz)
                                : fmt::format("{}x{}x{}/{}", bx, by, bz, points_per_thread);
}

CullLayout parse_cull_layout(const std::string& text) {
  CullLayout l;
  int used = -1, used_ppt = -1;
  const int n = std::sscanf(text.c_str(), "%dx%dx%d%n/%d%n", &l.bx, &l.by, &l.bz, &used, &l.points_per_thread,
                            &used_ppt);
  if (n == 3) l.points_per_thread = 1;
  const bool whole = (n == 3 && used == static_cast<int>(text.size())) ||
                     (n == 4 && used_ppt == static_cast<int>(text.size()));
  const bool shape_ok =
      whole && l.bx > 0 && l.by > 0 && l.bz > 0 && l.points_per_thread > 0 && l.bx % l.points_per_thread == 0;
  const int tx = shape_ok ? l.bx / l.points_per_thread : 0;
  const bool threads_ok = shape_ok && tx * l.by * l.bz == 128 && l.by % 4 == 0 &&
                          (tx == 1 ? l.bz % 8 == 0 : tx % 2 == 0 && l.bz % 4 == 0);
  if (!threads_ok)
    throw Error(
        fmt::format("orbital JIT brick '{}': expected BXxBYxBZ[/P] with (BX/P)*BY*BZ = 128 threads, BY a "
                    "multiple of 4, BZ a multiple of 4 (of 8 when BX/P = 1) and BX/P even or 1",
                    text));
  return l;
}

// The kernel. One block of 128 threads per brick of bx x by x bz points (aligned to the
// grid). The block first lists, in shared memory, the atoms that can be non-zero somewhere in the
// brick: distance from the brick's bounding sphere to the atom (double) against the atom's largest
// shell screening radius with a 1e-3 bohr margin, the rule of the sparse density path, so an atom
// left out is one whose eval function would have returned 0 at every point of the brick (its
// first test, r2 >= largest cutoff). Atoms are sorted by element type, so the list comes out
// grouped by type and each type's unrolled function runs in a loop that is uniform over the block
// (no divergence in the atom loop, no switch). Each entry holds the atom's offset from the brick
// centre, computed once in double and rounded to float.
//
// Precision of the fp32 offsets: the point's offset from the centre P (|P| <= brick radius, ~1
// bohr at VMD's spacing) and the atom's A are each rounded once (relative 2^-24), then
// d = P - A is one fp32 subtraction. The error of d is at most 2^-24 (|P| + |A| + |d|)
// <= 2^-23 (|d| + |P|): the same as (float)(p - a) (2^-24 |d|) up to a factor of 2
// for atoms farther than the brick radius, and at most ~1.2e-7 bohr (2^-23 x brick radius) for
// points near a nucleus, where the tightest C 1s primitive (alpha = 3047, slope 2 alpha r e^(-alpha
// r^2) <= 47 per bohr relative to its peak) moves by <= 6e-6 of its peak, below the 2e-5 test
// tolerance and comparable to the fp32 exp() error. Thread-to-point mapping: warps of 2 planes x 4
// rows x 4 columns (or 1 x 4 x 8 for one-plane bricks); point q of a thread sits bx/ppt planes
// after point q-1.
JitSource generate_jit_source(const PackedBasis& basis, const CullLayout& layout) {
  const CullLayout l = parse_cull_layout(layout.name());  // validates
  JitSource out;
  out.cull = l;
  out.points_per_thread = l.points_per_thread;
  const std::vector<std::size_t> representative = classify_atoms(basis, out);
  // Stable sort of the atoms by type.
  out.type_first.assign(static_cast<std::size_t>(out.type_count) + 1, 0);
  for (int t = 0; t < out.type_count; ++t) {
    for (std::size_t a = 0; a < basis.atom_count(); ++a)
      if (out.atom_type[a] == t) out.atom_order.push_back(static_cast<int>(a));
    out.type_first[static_cast<std::size_t>(t) + 1] = static_cast<int>(out.atom_order.size());
  }
  const int tx = l.bx / l.points_per_thread;
  std::string& src = out.source;
  src += kPreamble;
  src += fmt::format(
      "#define BX {}\n#define BY {}\n#define BZ {}\n#define PPT {}\n#define TX {}\n#define TYPES {}\n"
      "#define LIST_CAP 512\n\n",
      l.bx, l.by, l.bz, l.points_per_thread, tx, out.type_count);
  for (std::size_t t = 0; t < representative.size(); ++t)
    emit_type_function_points(src, basis, representative[t], static_cast<int>(t), l.points_per_thread);
  src += fmt::format(
      "extern \"C\" __global__ void __launch_bounds__(128) molaccel_orbital_jit(\n"
      "    const double* __restrict__ atom_xyz, const int* __restrict__ atom_base,\n"
      "    const float* __restrict__ atom_cut2, const int* __restrict__ type_first, int atoms,\n"
      "    const float* __restrict__ coefficients, OrbitalGridArgs g, float* __restrict__ out) {{\n"
      "  extern __shared__ float c[];\n"
      "  __shared__ float4 list[LIST_CAP];\n"
      "  __shared__ int list_s[LIST_CAP];\n"
      "  __shared__ int type_end[TYPES];\n"
      "  __shared__ int warp_count[4];\n"
      "  __shared__ int n_list;\n"
      "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
      "  for (int i = tid; i < g.components; i += 128) c[i] = coefficients[i];\n"
      "{}"
      "  const int bi0 = (g.plane_begin / BX + (int)blockIdx.z) * BX, bj0 = blockIdx.y * BY, bk0 = "
      "blockIdx.x * BZ;\n"
      "  double cen[3];\n"
      "  const double ci = bi0 + 0.5 * (BX - 1), cj = bj0 + 0.5 * (BY - 1), ck = bk0 + 0.5 * (BZ - 1);\n"
      "  for (int d = 0; d < 3; ++d) cen[d] = g.origin[d] + ci * g.axes[0][d] + cj * g.axes[1][d] + ck * "
      "g.axes[2][d];\n"
      "  double radius = 0.0;\n"
      "  {{\n"
      "    const int ext[3] = {{BX - 1, BY - 1, BZ - 1}};\n"
      "    for (int e = 0; e < 3; ++e)\n"
      "      radius += 0.5 * ext[e] * sqrt(g.axes[e][0] * g.axes[e][0] + g.axes[e][1] * g.axes[e][1] + "
      "g.axes[e][2] * g.axes[e][2]);\n"
      "  }}\n"
      "  // Offsets of this thread's points from the brick centre (small: exact enough in fp32).\n"
      "  float px[PPT], py[PPT], pz[PPT], v[PPT];\n"
      "#pragma unroll\n"
      "  for (int q = 0; q < PPT; ++q) {{\n"
      "    const double oi = li + q * TX - 0.5 * (BX - 1), oj = lj - 0.5 * (BY - 1), ok = lk - 0.5 * (BZ - "
      "1);\n"
      "    px[q] = (float)(oi * g.axes[0][0] + oj * g.axes[1][0] + ok * g.axes[2][0]);\n"
      "    py[q] = (float)(oi * g.axes[0][1] + oj * g.axes[1][1] + ok * g.axes[2][1]);\n"
      "    pz[q] = (float)(oi * g.axes[0][2] + oj * g.axes[1][2] + ok * g.axes[2][2]);\n"
      "    v[q] = 0.0f;\n"
      "  }}\n"
      "  for (int base = 0; base < atoms; base += LIST_CAP) {{\n"
      "    const int end = min(atoms, base + LIST_CAP);\n"
      "    __syncthreads();  // coefficients staged / previous list consumed\n"
      "    if (tid == 0) n_list = 0;\n"
      "    __syncthreads();\n"
      "    for (int s0 = base; s0 < end; s0 += 128) {{\n"
      "      const int s = s0 + tid;\n"
      "      bool keep = false;\n"
      "      float4 e = make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n"
      "      if (s < end) {{\n"
      "        const double dx = atom_xyz[3 * s] - cen[0], dy = atom_xyz[3 * s + 1] - cen[1], dz = "
      "atom_xyz[3 * s + 2] - cen[2];\n"
      "        const double gap = fmax(0.0, sqrt(dx * dx + dy * dy + dz * dz) - radius - 1e-3);\n"
      "        keep = gap * gap < (double)atom_cut2[s];\n"
      "        e = make_float4((float)dx, (float)dy, (float)dz, __int_as_float(atom_base[s]));\n"
      "      }}\n"
      "      const unsigned mask = __ballot_sync(0xffffffffu, keep);\n"
      "      if (lane == 0) warp_count[warp] = __popc(mask);\n"
      "      __syncthreads();\n"
      "      int offset = n_list;\n"
      "      for (int w = 0; w < warp; ++w) offset += warp_count[w];\n"
      "      if (keep) {{\n"
      "        const int j = offset + __popc(mask & ((1u << lane) - 1u));\n"
      "        list[j] = e;\n"
      "        list_s[j] = s;\n"
      "      }}\n"
      "      __syncthreads();\n"
      "      if (tid == 0) n_list += warp_count[0] + warp_count[1] + warp_count[2] + warp_count[3];\n"
      "      __syncthreads();\n"
      "    }}\n"
      "    // End of each type's run in the list: first entry whose atom is of a later type.\n"
      "    for (int t = tid; t < TYPES; t += 128) {{\n"
      "      const int key = type_first[t + 1];\n"
      "      int lo = 0, hi = n_list;\n"
      "      while (lo < hi) {{\n"
      "        const int mid = (lo + hi) >> 1;\n"
      "        if (list_s[mid] < key) lo = mid + 1; else hi = mid;\n"
      "      }}\n"
      "      type_end[t] = lo;\n"
      "    }}\n"
      "    __syncthreads();\n"
      "    int j = 0;\n",
      tx == 1 ? "  const int li = 0, lj = (warp / (BZ / 8)) * 4 + (lane >> 3), lk = (warp % (BZ / 8)) * 8 + "
                "(lane & 7);\n"
              : "  // warps of 2 planes x 4 rows x 4 columns\n"
                "  const int wk = warp % (BZ / 4), wj = (warp / (BZ / 4)) % (BY / 4), wi = warp / ((BZ / 4) "
                "* (BY / 4));\n"
                "  const int li = wi * 2 + (lane >> 4), lj = wj * 4 + ((lane >> 2) & 3), lk = wk * 4 + (lane "
                "& 3);\n");
  for (int t = 0; t < out.type_count; ++t)
    src += fmt::format(
        "    for (const int e = type_end[{0}]; j < e; ++j) {{\n"
        "      const float4 A = list[j];\n"
        "      float dx[PPT], dy[PPT], dz[PPT], r2[PPT];\n"
        "#pragma unroll\n"
        "      for (int q = 0; q < PPT; ++q) {{\n"
        "        dx[q] = px[q] - A.x;\n"
        "        dy[q] = py[q] - A.y;\n"
        "        dz[q] = pz[q] - A.z;\n"
        "        r2[q] = dx[q] * dx[q] + dy[q] * dy[q] + dz[q] * dz[q];\n"
        "      }}\n"
        "      evalp_type_{0}(dx, dy, dz, r2, c + __float_as_int(A.w), v);\n"
        "    }}\n",
        t);
  src +=
      "  }\n"
      "  const int j = bj0 + lj, k = bk0 + lk;\n"
      "  if (j >= g.ny || k >= g.nz) return;\n"
      "#pragma unroll\n"
      "  for (int q = 0; q < PPT; ++q) {\n"
      "    const int il = bi0 + li + q * TX - g.plane_begin;\n"
      "    if (il >= 0 && il < g.planes) out[((size_t)il * g.ny + j) * g.nz + k] = v[q];\n"
      "  }\n"
      "}\n";
  return out;
}

// The OpenCL C JIT kernel: the per-element-type functions of the CUDA kernel (one point per
// work-item), and a kernel over the atoms sorted by type, each type's loop with literal bounds.
// Point-atom offsets are taken in COORD (double where the device has fp64, as the CUDA kernel's
// brick-centre offsets) and rounded to float once.
JitSource generate_opencl_jit_source(const PackedBasis& basis, bool fp64_coordinates) {
  JitSource out;
  out.kernel_name = "molaccel_orbital_jit_cl";
  const std::vector<std::size_t> representative = classify_atoms(basis, out);
  out.type_first.assign(static_cast<std::size_t>(out.type_count) + 1, 0);
  for (int t = 0; t < out.type_count; ++t) {
    for (std::size_t a = 0; a < basis.atom_count(); ++a)
      if (out.atom_type[a] == t) out.atom_order.push_back(static_cast<int>(a));
    out.type_first[static_cast<std::size_t>(t) + 1] = static_cast<int>(out.atom_order.size());
  }
  std::string& src = out.source;
  src += "// Generated by molaccel (orbital JIT, OpenCL C): basis set folded into the code.\n";
  src += fp64_coordinates ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\ntypedef double COORD;\n"
                          : "typedef float COORD;\n";
  src += "#define PPT 1\n#define ex2_approx(x) exp2(x)\n\n";
  for (std::size_t t = 0; t < representative.size(); ++t)
    emit_type_function_points(src, basis, representative[t], static_cast<int>(t), 1, true);
  src +=
      "// One work-item per point (k fastest); grid: origin[3], axes[3][3]; atoms sorted by type.\n"
      "__kernel void molaccel_orbital_jit_cl(__global const COORD* restrict atom_xyz,\n"
      "                                      __global const int* restrict atom_base,\n"
      "                                      __global const float* restrict c, __global const COORD* "
      "restrict grid,\n"
      "                                      int nx, int ny, int nz, __global float* restrict out) {\n"
      "  const int k = get_global_id(0), j = get_global_id(1), i = get_global_id(2);\n"
      "  if (i >= nx || j >= ny || k >= nz) return;\n"
      "  COORD p[3];\n"
      "  for (int d = 0; d < 3; ++d) p[d] = grid[d] + i * grid[3 + d] + j * grid[6 + d] + k * grid[9 + d];\n"
      "  float v[1] = {0.0f};\n";
  for (int t = 0; t < out.type_count; ++t)
    src += fmt::format(
        "  for (int s = {}; s < {}; ++s) {{\n"
        "    float dx[1], dy[1], dz[1], r2[1];\n"
        "    dx[0] = (float)(p[0] - atom_xyz[3 * s]);\n"
        "    dy[0] = (float)(p[1] - atom_xyz[3 * s + 1]);\n"
        "    dz[0] = (float)(p[2] - atom_xyz[3 * s + 2]);\n"
        "    r2[0] = dx[0] * dx[0] + dy[0] * dy[0] + dz[0] * dz[0];\n"
        "    evalp_type_{}(dx, dy, dz, r2, c + atom_base[s], v);\n"
        "  }}\n",
        out.type_first[static_cast<std::size_t>(t)], out.type_first[static_cast<std::size_t>(t) + 1], t);
  src +=
      "  out[((size_t)i * ny + j) * nz + k] = v[0];\n"
      "}\n";
  return out;
}

BackgroundCompiles::~BackgroundCompiles() {
  wait_all();
}

void BackgroundCompiles::wait_all() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

void BackgroundCompiles::hold() {
  std::lock_guard lock(mutex_);
  held_ = true;
}

void BackgroundCompiles::release() {
  {
    std::lock_guard lock(mutex_);
    held_ = false;
  }
  released_.notify_all();
}

bool BackgroundCompiles::started(const std::string& key) const {
  std::lock_guard lock(mutex_);
  return entries_.count(key) > 0;
}

std::optional<JitProgram> BackgroundCompiles::get(const std::string& key, const Compile& compile, bool wait) {
  std::shared_future<JitProgram> program;
  {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      program = it->second.program;
    } else if (!wait) {
      std::packaged_task<JitProgram()> task([this, compile] {
        {
          std::unique_lock hold(mutex_);
          released_.wait(hold, [this] { return !held_; });
        }
        return compile();
      });
      std::shared_future<JitProgram> future = task.get_future().share();
      threads_.emplace_back(std::move(task));  // may throw: then nothing is recorded
      entries_[key].program = future;
      return std::nullopt;
    }
  }
  if (!program.valid()) return compile();  // needed now and not in flight: compiled here
  if (wait) return program.get();          // waits; rethrows a failed compile's error
  if (program.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return std::nullopt;
  try {
    return program.get();
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    Entry& entry = entries_[key];
    if (!entry.failure_logged)
      log_warn("the JIT kernel's compile failed; the generic kernel computes instead: {}", e.what());
    entry.failure_logged = true;
    return std::nullopt;
  }
}

BackgroundCompiles& background_jit_compiles() {
  // The default JIT cache first: the compiles use it until this instance's destructor has joined
  // them, so it must be destroyed after this one.
  (void)default_jit_cache();
  static BackgroundCompiles compiles;
  // Its compiles are waited for before the process ends (finish_background_work), not by its
  // destructor alone: by then exit() has destroyed NVRTC's statics under a running compile.
  static const bool waited = [] {
    on_finish_background_work([] { compiles.wait_all(); });
    return true;
  }();
  (void)waited;
  return compiles;
}

}  // namespace molaccel::orbital::detail
