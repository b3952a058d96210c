// Conventions of files from real programs: h and i shells (l = 5, 6: cc-pV5Z, def2-QZVPP for
// transition metals) in Molden and fchk files, pure and Cartesian, through the readers, the
// normalisation check, the reference and the CPU kernels; Turbomole's Cartesian MO coefficients.
#include <numbers>
#include <sstream>

#include "high_l_util.hpp"
#include "orbital/basis_functions.hpp"
#include "orbital/cpu/cpu_kernel.hpp"
#include "orbital/jit_source.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/reference/reference.hpp"
#include "orbital_test_util.hpp"

namespace molaccel::orbital {
namespace {

constexpr char kShellLetters[] = "spdfghi";

using test::add_orthonormal_orbitals;
using test::high_l_basis;

// Molden text. `high_flags`: write [11H] [13I] for pure h and i (writers differ: without them the
// reader tells pure from Cartesian by the function count). `scale(shell, function)` multiplies the
// MO coefficients, to imitate a writer's convention.
std::string to_molden(const Wavefunction& wfn, bool high_flags,
                      const std::function<double(const Shell&, int)>& scale = {}) {
  std::ostringstream out;
  out.precision(17);
  out << "[Molden Format]\n[Atoms] AU\n";
  for (std::size_t a = 0; a < wfn.atoms.size(); ++a)
    out << wfn.atoms[a].label << " " << a + 1 << " " << wfn.atoms[a].atomic_number << " "
        << wfn.atoms[a].position[0] << " " << wfn.atoms[a].position[1] << " " << wfn.atoms[a].position[2]
        << "\n";
  out << "[GTO]\n";
  bool pure[7] = {};
  for (std::size_t a = 0; a < wfn.atoms.size(); ++a) {
    out << "  " << a + 1 << " 0\n";
    for (const Shell& s : wfn.shells) {
      if (s.atom != static_cast<int>(a)) continue;
      pure[s.l] = s.pure;
      out << " " << kShellLetters[s.l] << " " << s.exponents.size() << " 1.00\n";
      for (std::size_t p = 0; p < s.exponents.size(); ++p)
        out << "  " << s.exponents[p] << " " << s.coefficients[p] << "\n";
    }
    out << "\n";
  }
  if (pure[2]) out << "[5D7F]\n[9G]\n";
  if (pure[5] && high_flags) out << "[11H]\n[13I]\n";
  out << "[MO]\n";
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  for (std::size_t o = 0; o < wfn.alpha.count(); ++o) {
    out << " Sym= A\n Ene= " << wfn.alpha.energies[o]
        << "\n Spin= Alpha\n Occup= " << wfn.alpha.occupations[o] << "\n";
    std::size_t f = 0;
    for (const Shell& s : wfn.shells)
      for (int i = 0; i < s.function_count(); ++i, ++f)
        out << " " << f + 1 << " " << wfn.alpha.coefficients[o * n + f] * (scale ? scale(s, i) : 1.0) << "\n";
  }
  return out.str();
}

// Gaussian's Cartesian order for l >= 4, written out independently of the library's tables: x
// power ascending, then y (zzzzz, yzzzz, yyzzz, ..., xxxxy, xxxxx for h).
std::vector<std::array<int, 3>> gaussian_cartesian_order(int l) {
  std::vector<std::array<int, 3>> order;
  for (int x = 0; x <= l; ++x)
    for (int y = 0; x + y <= l; ++y) order.push_back({x, y, l - x - y});
  return order;
}

// fchk text as Gaussian writes it (shell types -l pure, l Cartesian; E16.8 values).
std::string to_fchk(const Wavefunction& wfn) {
  std::ostringstream out;
  out << "h and i shells, written by the molaccel tests\nSP        RHF                              "
         "                           Gen\n";
  auto header_i = [&](const char* name, long v) { out << fmt::format("{:<40}   I     {:12d}\n", name, v); };
  auto array_i = [&](const char* name, const std::vector<long>& v) {
    out << fmt::format("{:<40}   I   N={:12d}\n", name, v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out << fmt::format("{:12d}", v[i]) << ((i % 6 == 5 || i + 1 == v.size()) ? "\n" : "");
  };
  auto array_r = [&](const char* name, const std::vector<double>& v) {
    out << fmt::format("{:<40}   R   N={:12d}\n", name, v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out << fmt::format("{:16.8E}", v[i]) << ((i % 5 == 4 || i + 1 == v.size()) ? "\n" : "");
  };
  long electrons = 0;
  for (double occ : wfn.alpha.occupations) electrons += static_cast<long>(occ);
  header_i("Number of atoms", static_cast<long>(wfn.atoms.size()));
  header_i("Number of alpha electrons", electrons / 2);
  header_i("Number of beta electrons", electrons / 2);
  header_i("Number of basis functions", wfn.function_count());
  std::vector<long> z, types, prims, atoms;
  std::vector<double> xyz, exps, coefs;
  for (const auto& a : wfn.atoms) {
    z.push_back(a.atomic_number);
    for (double c : a.position) xyz.push_back(c);
  }
  for (const Shell& sh : wfn.shells) {
    types.push_back(sh.pure ? -sh.l : sh.l);
    prims.push_back(static_cast<long>(sh.exponents.size()));
    atoms.push_back(sh.atom + 1);
    exps.insert(exps.end(), sh.exponents.begin(), sh.exponents.end());
    coefs.insert(coefs.end(), sh.coefficients.begin(), sh.coefficients.end());
  }
  array_i("Atomic numbers", z);
  array_r("Current cartesian coordinates", xyz);
  array_i("Shell types", types);
  array_i("Number of primitives per shell", prims);
  array_i("Shell to atom map", atoms);
  array_r("Primitive exponents", exps);
  array_r("Contraction coefficients", coefs);
  array_r("Alpha Orbital Energies", wfn.alpha.energies);
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  std::vector<double> file_order = wfn.alpha.coefficients;
  std::size_t offset = 0;
  for (const Shell& sh : wfn.shells) {
    if (!sh.pure && sh.l >= 4) {
      const auto order = gaussian_cartesian_order(sh.l);
      const auto& ours = detail::cartesian_powers(sh.l);
      for (std::size_t f = 0; f < order.size(); ++f) {
        std::size_t mine = ours.size();
        for (std::size_t c = 0; c < ours.size(); ++c)
          if (ours[c].x == order[f][0] && ours[c].y == order[f][1] && ours[c].z == order[f][2]) mine = c;
        EXPECT_LT(mine, ours.size());
        for (std::size_t o = 0; o < wfn.alpha.count(); ++o)
          file_order[o * n + offset + f] = wfn.alpha.coefficients[o * n + offset + mine];
      }
    }
    offset += static_cast<std::size_t>(sh.function_count());
  }
  array_r("Alpha MO coefficients", file_order);
  return out.str();
}

// max |psi_a - psi_b| over a few points for every orbital (reference basis values).
double value_difference(const Wavefunction& a, const Wavefunction& b) {
  double worst = 0;
  for (const std::array<double, 3>& p :
       {std::array<double, 3>{0.3, -0.4, 0.2}, {1.1, 0.7, -0.9}, {-0.5, 1.6, 0.8}, {1.4, 0.2, -0.1}}) {
    const auto va = reference::basis_values(a, p), vb = reference::basis_values(b, p);
    const std::size_t na = va.size(), nb = vb.size();
    for (std::size_t o = 0; o < std::min(a.alpha.count(), b.alpha.count()); ++o) {
      double pa = 0, pb = 0;
      for (std::size_t f = 0; f < na; ++f) pa += a.alpha.coefficients[o * na + f] * va[f];
      for (std::size_t f = 0; f < nb; ++f) pb += b.alpha.coefficients[o * nb + f] * vb[f];
      worst = std::max(worst, std::abs(pa - pb));
    }
  }
  return worst;
}

// The reference (Legendre-based harmonics, its own norms) against the overlap matrix of the fast
// paths' Cartesian expansion (solid-harmonic expansion, Obara-Saika) for one h and one i shell:
// <chi_f | chi_g> by the trapezoid rule on a uniform grid, which converges faster than any power of
// the spacing for these Gaussians (h = 0.25 bohr, exponent 1.3: aliasing error of order
// exp(-pi^2 / (2.6 h^2)) times the polynomial's growth, below 1e-11).
TEST(OrbitalHighL, ReferenceFunctionsHaveTheOverlapOfTheCartesianExpansion) {
  for (int l : {5, 6})
    for (bool pure : {true, false}) {
      Wavefunction wfn;
      wfn.source = "one-shell";
      wfn.atoms.push_back({1, "H", {0, 0, 0}, 1});
      wfn.shells.push_back({0, l, pure, {1.3}, {1.0}});
      const std::size_t n = static_cast<std::size_t>(wfn.function_count());
      const std::vector<double> s = overlap_matrix(wfn);
      std::vector<double> numeric(n * n, 0.0);
      const double h = 0.25;
      const int half = 24;  // +-6 bohr: r^12 exp(-2.6 * 36) is negligible
      for (int i = -half; i <= half; ++i)
        for (int j = -half; j <= half; ++j)
          for (int k = -half; k <= half; ++k) {
            const auto v = reference::basis_values(wfn, {i * h, j * h, k * h});
            for (std::size_t f = 0; f < n; ++f)
              for (std::size_t g = f; g < n; ++g) numeric[f * n + g] += v[f] * v[g] * h * h * h;
          }
      for (std::size_t f = 0; f < n; ++f) {
        EXPECT_NEAR(s[f * n + f], 1.0, 1e-12) << "l " << l << (pure ? " pure" : " Cartesian");
        for (std::size_t g = f; g < n; ++g)
          EXPECT_NEAR(numeric[f * n + g], s[f * n + g], 1e-9)
              << "l " << l << (pure ? " pure" : " Cartesian") << " functions " << f << ", " << g;
      }
    }
}

// Pure h functions are the real solid harmonics: m = 0 is proportional to r^5 P_5(cos theta) =
// z (63 z^4 - 70 z^2 r^2 + 15 r^4) / 8, m = +5 to Re (x + iy)^5; the ratio of the values at two
// points does not depend on the normalisation. The fast paths' expansion gives the same values.
TEST(OrbitalHighL, PureHFunctionsAreSolidHarmonics) {
  Wavefunction wfn;
  wfn.source = "h";
  wfn.atoms.push_back({1, "H", {0, 0, 0}, 1});
  wfn.shells.push_back({0, 5, true, {0.8}, {1.0}});
  const auto expanded = detail::expand_shells(wfn);
  const auto& powers = detail::cartesian_powers(5);
  const std::array<std::array<double, 3>, 2> points{{{0.3, -0.5, 0.7}, {-0.9, 0.2, 0.4}}};
  std::array<double, 2> m0{}, m5{}, v0{}, v9{};
  for (std::size_t i = 0; i < 2; ++i) {
    const double x = points[i][0], y = points[i][1], z = points[i][2], r2 = x * x + y * y + z * z;
    const double radial = std::exp(-0.8 * r2);
    m0[i] = z * (63 * z * z * z * z - 70 * z * z * r2 + 15 * r2 * r2) / 8 * radial;
    m5[i] = (x * x * x * x * x - 10 * x * x * x * y * y + 5 * x * y * y * y * y) * radial;
    const auto v = reference::basis_values(wfn, points[i]);
    v0[i] = v[0];
    v9[i] = v[9];  // rows: m = 0, +1, -1, ..., +5 is row 9
    for (int row : {0, 9}) {
      double fast = 0;
      for (int c = 0; c < expanded[0].components; ++c)
        fast += expanded[0].weight[static_cast<std::size_t>(row * expanded[0].components + c)] *
                std::pow(x, powers[c].x) * std::pow(y, powers[c].y) * std::pow(z, powers[c].z);
      EXPECT_NEAR(fast * expanded[0].radial[0] * radial, v[static_cast<std::size_t>(row)], 1e-12);
    }
  }
  EXPECT_NEAR(v0[1] / v0[0], m0[1] / m0[0], 1e-12);
  EXPECT_NEAR(v9[1] / v9[0], m5[1] / m5[0], 1e-12);
}

// fp32 kernels against the double reference: see test_cpu.cpp for the 2e-5 bound (h and i
// functions add terms of the same size, with the angular weights folded into the coefficients).
TEST(OrbitalHighL, CpuKernelsMatchReference) {
  const auto resources = Resources::cpu(2);
  for (bool pure : {true, false}) {
    Wavefunction wfn = high_l_basis(pure);
    add_orthonormal_orbitals(wfn, 6, pure ? 3u : 4u);
    GridSpec grid = automatic_grid(wfn, 2.5, 0.3);
    grid.counts[2] = 21;  // an odd remainder of tiles
    const std::vector<OrbitalRef> refs{{Spin::alpha, 0}, {Spin::alpha, 4}};
    const auto expected = reference::evaluate_orbitals(wfn, grid, refs, 2);
    EvaluateOptions cpu;
    cpu.backend = Backend::cpu;
    EXPECT_LT(test::relative_max_error(evaluate_orbitals(resources, wfn, grid, refs, cpu), expected), 2e-5);
    // One orbital at a time (the angular sums unrolled per l) as well.
    EXPECT_LT(
        test::relative_max_error(
            evaluate_orbitals(resources, wfn, grid, std::vector<OrbitalRef>{refs[1]}, cpu),
            std::vector<double>(expected.begin() + static_cast<long>(grid.point_count()), expected.end())),
        2e-5);
    const auto rho_expected = reference::evaluate_density(wfn, grid, DensityKind::total, 2);
    EXPECT_LT(test::relative_max_error(evaluate_density(resources, wfn, grid, DensityKind::total, cpu),
                                       rho_expected),
              2e-5);
    // Every SIMD variant compiled here.
    const auto basis = detail::pack_basis(wfn, 1e-9);
    const auto coefficients = detail::cartesian_coefficients(wfn, refs);
    std::vector<cpu::RowKernel> kernels{&cpu::isa_scalar::evaluate_rows};
    if (cpu_info().simd >= SimdLevel::avx2) kernels.push_back(&cpu::isa_avx2::evaluate_rows);
    if (cpu_info().simd >= SimdLevel::avx512) kernels.push_back(&cpu::isa_avx512::evaluate_rows);
    for (auto kernel : kernels) {
      std::vector<float> out(grid.point_count() * refs.size());
      cpu::KernelArgs args{&basis, coefficients.data(), refs.size(), nullptr, &grid, out.data()};
      kernel(args, 0, grid.counts[0] * grid.counts[1]);
      EXPECT_LT(test::relative_max_error(out, expected), 2e-5);
    }
  }
}

// The JIT generator writes each monomial from the basis tables, so h and i need nothing of their
// own there: the generated kernel holds the i monomials and compiles with NVRTC (no GPU needed;
// the GPU results are checked by test_orbital_cuda_high_l).
TEST(OrbitalHighL, JitSourceHasTheMonomialsAndCompiles) {
  for (bool pure : {true, false}) {
    Wavefunction wfn = high_l_basis(pure);
    add_orthonormal_orbitals(wfn, 2, 5);
    const auto src =
        detail::generate_jit_source(detail::pack_basis(wfn, 1e-9), detail::parse_cull_layout("8x8x8/4"));
    EXPECT_NE(src.source.find("dz[q]*dz[q]*dz[q]*dz[q]*dz[q]*dz[q]"), std::string::npos);
    EXPECT_NE(src.source.find("dx[q]*dx[q]*dx[q]*dx[q]*dx[q]*dy[q]"), std::string::npos);
    MOLACCEL_REQUIRE_NVRTC();
    JitRequest request;
    request.source = src.source;
    request.program_name = "orbital_jit_high_l_test.cu";
    request.kernel_names = {src.kernel_name};
    request.arch = "sm_90";
    EXPECT_FALSE(default_jit_cache().compile(request).cubin.empty());
  }
}

TEST(OrbitalHighL, MoldenRoundTripPureAndCartesian) {
  for (bool pure : {true, false}) {
    Wavefunction wfn = high_l_basis(pure);
    add_orthonormal_orbitals(wfn, 8, 7);
    for (bool flags : {true, false}) {
      if (!pure && flags) continue;
      const auto read = read_molden_text("hi.molden", to_molden(wfn, flags));
      EXPECT_EQ(read.function_count(), wfn.function_count()) << (pure ? "pure" : "Cartesian");
      for (std::size_t s = 0; s < wfn.shells.size(); ++s) EXPECT_EQ(read.shells[s].pure, wfn.shells[s].pure);
      EXPECT_EQ(read.normalisation.fix, "none");
      EXPECT_LT(read.normalisation.deviation_as_read, 1e-12);
      EXPECT_LT(value_difference(read, wfn), 1e-12);
    }
  }
}

TEST(OrbitalHighL, FchkRoundTripPureAndCartesian) {
  for (bool pure : {true, false}) {
    Wavefunction wfn = high_l_basis(pure);
    add_orthonormal_orbitals(wfn, 8, 9);
    const auto read = read_fchk_text("hi.fchk", to_fchk(wfn));
    EXPECT_EQ(read.function_count(), wfn.function_count());
    for (std::size_t s = 0; s < wfn.shells.size(); ++s) EXPECT_EQ(read.shells[s].pure, wfn.shells[s].pure);
    EXPECT_EQ(read.normalisation.fix, "none");
    EXPECT_LT(value_difference(read, wfn), 1e-6) << (pure ? "pure" : "Cartesian");  // 8 decimals
  }
}

// The first Cartesian h function of a Molden or fchk file is zzzzz (Gaussian's order): an orbital
// made of it alone vanishes on the x axis and not on the z axis.
TEST(OrbitalHighL, FirstCartesianHFunctionIsZzzzz) {
  Wavefunction wfn;
  wfn.source = "zzzzz";
  wfn.atoms.push_back({1, "H", {0, 0, 0}, 1});
  wfn.shells.push_back({0, 5, false, {0.6}, {1.0}});
  wfn.alpha.energies = {-0.5};
  wfn.alpha.occupations = {2.0};
  wfn.alpha.symmetries = {"A"};
  wfn.alpha.coefficients.assign(21, 0.0);
  wfn.alpha.coefficients[0] = 1.0;
  for (const auto& read :
       {read_molden_text("z5.molden", to_molden(wfn, false)), read_fchk_text("z5.fchk", to_fchk(wfn))}) {
    const auto on_z = reference::basis_values(read, {0, 0, 0.9});
    const auto on_x = reference::basis_values(read, {0.9, 0, 0});
    EXPECT_GT(std::abs(read.alpha.coefficients[0] * on_z[0]), 1e-3) << read.format;
    EXPECT_EQ(read.alpha.coefficients[0] * on_x[0], 0.0) << read.format;
  }
}

TEST(OrbitalHighL, ShellTypesBeyondIAreClearErrors) {
  Wavefunction wfn = high_l_basis(true);
  add_orthonormal_orbitals(wfn, 2, 1);
  std::string molden = to_molden(wfn, true);
  molden.replace(molden.find(" i 1 "), 5, " k 1 ");
  try {
    (void)read_molden_text("k.molden", molden);
    ADD_FAILURE() << "k shell accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported shell type 'k'"), std::string::npos) << e.what();
  }
  std::string fchk = to_fchk(wfn);
  const auto at = fchk.find("          -6");
  ASSERT_NE(at, std::string::npos);
  fchk.replace(at, 12, "          -7");
  EXPECT_THROW((void)read_fchk_text("k.fchk", fchk), InputError);
}

// Turbomole's Molden files (tm2molden) give the MO coefficients of Cartesian d, f, g functions
// too small by sqrt(3), sqrt(15), sqrt(105) = sqrt((2l-1)!!), the same factor for every component
// of the shell (iodata's Molden loader and Molden2AIM scale them back by it). Such a file was
// rejected ("max |C^T S C - I| = 0.495 and no known writer fix repairs them"); now it reads as the
// same wavefunction written conventionally, with contractions normalised or not.
TEST(OrbitalWriters, TurbomoleCartesianMoldenMatchesConventionalFile) {
  const auto wfn = test::orthonormal_random_wavefunction(21, 3, 8, false);
  const auto conventional = read_molden_text("conventional.molden", to_molden(wfn, false));
  EXPECT_EQ(conventional.normalisation.fix, "none");
  const auto turbomole_factor = [](const Shell& s, int) {
    return !s.pure && s.l >= 2 ? 1.0 / std::sqrt(detail::double_factorial_odd(s.l)) : 1.0;
  };
  const auto turbomole = read_molden_text("turbomole.molden", to_molden(wfn, false, turbomole_factor));
  EXPECT_EQ(turbomole.normalisation.fix, "turbomole");
  EXPECT_GT(turbomole.normalisation.deviation_as_read, 1e-2);
  EXPECT_LT(turbomole.normalisation.deviation_after_fix, 1e-10);
  EXPECT_LT(value_difference(turbomole, conventional), 1e-10);

  // Contraction coefficients as printed for unnormalised contractions (three times too large),
  // MO coefficients for those contractions and Turbomole's factor on top.
  Wavefunction raw = wfn;
  for (Shell& shell : raw.shells)
    for (double& c : shell.coefficients) c *= 3.0;
  const auto both =
      read_molden_text("turbomole-raw.molden", to_molden(raw, false, [&](const Shell& s, int f) {
                         double norm2 = 0;
                         for (std::size_t p = 0; p < s.exponents.size(); ++p)
                           for (std::size_t q = 0; q < s.exponents.size(); ++q) {
                             const double a = s.exponents[p], b = s.exponents[q];
                             norm2 += s.coefficients[p] * s.coefficients[q] *
                                      std::pow(2 * std::sqrt(a * b) / (a + b), s.l + 1.5);
                           }
                         return turbomole_factor(s, f) / std::sqrt(norm2);
                       }));
  EXPECT_EQ(both.normalisation.fix, "turbomole+unnormalised-contractions");
  EXPECT_LT(value_difference(both, conventional), 1e-10);
}

}  // namespace
}  // namespace molaccel::orbital
