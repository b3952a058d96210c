// Readers and writers: Molden flavours (units, flags, Fortran exponents, alpha/beta), the
// normalisation check with each writer fix, .fchk (SP shells, pure and Cartesian), cube files,
// orbital names, grids, and precise errors on bad or truncated input.
#include <sstream>

#include "orbital/basis_functions.hpp"
#include "orbital/reference/reference.hpp"
#include "orbital_test_util.hpp"

namespace molaccel::orbital {
namespace {

using molaccel::testing::read_file;

// Writes a wavefunction as Molden text; `scale(shell, function)` multiplies the MO coefficients
// (to imitate a writer's convention).
std::string to_molden(const Wavefunction& wfn, const std::function<double(const Shell&, int)>& scale = {}) {
  std::ostringstream out;
  out.precision(17);
  out << "[Molden Format]\n[Title]\n written by the molaccel tests\n[Atoms] AU\n";
  for (std::size_t a = 0; a < wfn.atoms.size(); ++a)
    out << wfn.atoms[a].label << " " << a + 1 << " " << wfn.atoms[a].atomic_number << " "
        << wfn.atoms[a].position[0] << " " << wfn.atoms[a].position[1] << " " << wfn.atoms[a].position[2]
        << "\n";
  out << "[GTO]\n";
  for (std::size_t a = 0; a < wfn.atoms.size(); ++a) {
    out << "  " << a + 1 << " 0\n";
    for (const Shell& s : wfn.shells) {
      if (s.atom != static_cast<int>(a)) continue;
      out << " "
          << "spdfg"[s.l] << " " << s.exponents.size() << " 1.00\n";
      for (std::size_t p = 0; p < s.exponents.size(); ++p)
        out << "  " << s.exponents[p] << " " << s.coefficients[p] << "\n";
    }
    out << "\n";
  }
  bool pure[5] = {false, false, false, false, false};
  for (const Shell& s : wfn.shells) pure[s.l] = s.pure;
  if (pure[2] && pure[3])
    out << "[5D7F]\n";
  else if (pure[2])
    out << "[5D10F]\n";
  else if (pure[3])
    out << "[7F]\n";
  if (pure[4]) out << "[9G]\n";
  out << "[MO]\n";
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  auto write_set = [&](const OrbitalSet& set, const char* spin) {
    for (std::size_t o = 0; o < set.count(); ++o) {
      out << " Sym= A\n Ene= " << set.energies[o] << "\n Spin= " << spin << "\n Occup= " << set.occupations[o]
          << "\n";
      std::size_t f = 0;
      for (const Shell& s : wfn.shells)
        for (int i = 0; i < s.function_count(); ++i, ++f)
          out << " " << f + 1 << " " << set.coefficients[o * n + f] * (scale ? scale(s, i) : 1.0) << "\n";
    }
  };
  write_set(wfn.alpha, "Alpha");
  write_set(wfn.beta, "Beta");
  return out.str();
}

// The same orbitals expressed in Cartesian functions (each unit-normalised): only the occupied
// orbitals, which stay orthonormal (the 6th d combination, r^2, is not needed).
Wavefunction to_cartesian(const Wavefunction& pure) {
  Wavefunction cart = pure;
  for (Shell& s : cart.shells) s.pure = false;
  const auto pure_shells = detail::expand_shells(pure);
  const auto cart_shells = detail::expand_shells(cart);
  const std::size_t np = static_cast<std::size_t>(pure.function_count()),
                    nc = static_cast<std::size_t>(cart.function_count());
  cart.alpha = OrbitalSet{};
  for (std::size_t o = 0; o < pure.alpha.count(); ++o) {
    if (pure.alpha.occupations[o] == 0) continue;
    cart.alpha.energies.push_back(pure.alpha.energies[o]);
    cart.alpha.occupations.push_back(pure.alpha.occupations[o]);
    cart.alpha.symmetries.push_back("A");
    std::size_t fp = 0;
    for (std::size_t s = 0; s < pure_shells.size(); ++s) {
      const auto& ps = pure_shells[s];
      const auto& cs = cart_shells[s];
      for (int c = 0; c < cs.components; ++c) {
        double sum = 0;  // sum_f C_f w_fc over the pure functions, divided by the unit Cartesian weight
        for (int f = 0; f < ps.functions; ++f)
          sum += pure.alpha.coefficients[o * np + fp + f] * ps.weight[f * ps.components + c];
        cart.alpha.coefficients.push_back(sum / cs.weight[c * cs.components + c]);
      }
      fp += static_cast<std::size_t>(ps.functions);
    }
    (void)nc;
  }
  return cart;
}

double axis_ratio(const Shell& s, int f) {
  const auto& p = detail::cartesian_powers(s.l)[static_cast<std::size_t>(f)];
  return detail::double_factorial_odd(p.x) * detail::double_factorial_odd(p.y) *
         detail::double_factorial_odd(p.z) / detail::double_factorial_odd(s.l);
}

// max |psi_a - psi_b| over a few points for the first occupied orbitals.
double value_difference(const Wavefunction& a, const Wavefunction& b) {
  double worst = 0;
  for (const std::array<double, 3>& p :
       {std::array<double, 3>{0.3, -0.4, 0.2}, {1.1, 0.7, -0.9}, {-0.5, 1.6, 0.8}}) {
    const auto va = reference::basis_values(a, p), vb = reference::basis_values(b, p);
    const std::size_t na = va.size(), nb = vb.size();
    for (std::size_t o = 0; o < std::min<std::size_t>(3, std::min(a.alpha.count(), b.alpha.count())); ++o) {
      double pa = 0, pb = 0;
      for (std::size_t f = 0; f < na; ++f) pa += a.alpha.coefficients[o * na + f] * va[f];
      for (std::size_t f = 0; f < nb; ++f) pb += b.alpha.coefficients[o * nb + f] * vb[f];
      worst = std::max(worst, std::abs(pa - pb));
    }
  }
  return worst;
}

TEST(OrbitalIo, ReadsPsi4Water) {
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  EXPECT_EQ(wfn.atoms.size(), 3u);
  EXPECT_EQ(wfn.atoms[0].atomic_number, 8);
  EXPECT_EQ(wfn.function_count(), 18);  // O: s s p s p d(5) = 14; H: s s = 2 each
  EXPECT_EQ(wfn.alpha.count(), 18u);
  EXPECT_FALSE(wfn.unrestricted());
  EXPECT_DOUBLE_EQ(wfn.electron_count(), 10.0);
  EXPECT_EQ(wfn.normalisation.fix, "none");
  EXPECT_LT(wfn.normalisation.deviation_as_read, 1e-8);
  EXPECT_NEAR(wfn.atoms[1].position[1], 1.430522676972, 1e-12);
}

TEST(OrbitalIo, AngstromUnitsAndFortranExponents) {
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  std::string text = read_file(test::bundled("h2o_631gs.molden"));
  std::ostringstream atoms;
  atoms.precision(15);
  atoms << "[Atoms] Angs\n";
  for (std::size_t a = 0; a < 3; ++a)
    atoms << (a ? "H " : "O ") << a + 1 << " " << wfn.atoms[a].atomic_number << " "
          << wfn.atoms[a].position[0] * bohr_in_angstrom << " " << wfn.atoms[a].position[1] * bohr_in_angstrom
          << " " << wfn.atoms[a].position[2] * bohr_in_angstrom << "\n";
  const auto begin = text.find("[Atoms]"), end = text.find("[GTO]");
  text = text.substr(0, begin) + atoms.str() + text.substr(end);
  const auto pos = text.find("5484.6717000000");
  text.replace(pos, 15, "5.4846717000D+03");
  const auto again = read_molden_text("angs.molden", text);
  for (std::size_t a = 0; a < 3; ++a)
    for (int d = 0; d < 3; ++d) EXPECT_NEAR(again.atoms[a].position[d], wfn.atoms[a].position[d], 1e-12);
  EXPECT_DOUBLE_EQ(again.shells[0].exponents[0], 5484.6717);
}

TEST(OrbitalIo, CartesianFileAndPsi4CartesianBugFix) {
  const auto pure = read_molden(test::bundled("h2o_631gs.molden"));
  const auto cart = to_cartesian(pure);
  const auto read_back = read_molden_text("cart.molden", to_molden(cart));
  EXPECT_EQ(read_back.function_count(), 19);
  EXPECT_EQ(read_back.normalisation.fix, "none");
  EXPECT_LT(value_difference(read_back, pure), 1e-10);
  // Psi4 <= 1.3.2: Cartesian coefficients for functions normalised like x^l.
  const auto buggy = read_molden_text("psi4-cart.molden", to_molden(cart, [](const Shell& s, int f) {
                                        return s.l >= 2 ? 1.0 / std::sqrt(axis_ratio(s, f)) : 1.0;
                                      }));
  EXPECT_EQ(buggy.normalisation.fix, "cartesian-axis-normalisation");
  EXPECT_GT(buggy.normalisation.deviation_as_read, 1e-2);
  EXPECT_LT(value_difference(buggy, pure), 1e-10);
}

TEST(OrbitalIo, OrcaSignConventionForFAndGFunctions) {
  // A non-linear molecule (in N2 the m = +-3 functions of both atoms only mix with each other,
  // so a sign convention there is invisible to the overlap check and changes no density).
  const auto wfn = test::orthonormal_random_wavefunction(17, 3, 6);
  const auto orca = read_molden_text("orca.molden", to_molden(wfn, [](const Shell& s, int f) {
                                       return s.pure && s.l >= 3 && f >= 5 ? -1.0 : 1.0;
                                     }));
  EXPECT_EQ(orca.normalisation.fix, "orca");
  EXPECT_LT(value_difference(orca, wfn), 1e-10);
}

TEST(OrbitalIo, UnnormalisedContractions) {
  // Contraction coefficients three times too large (as some writers print them): the functions
  // are the same after renormalisation, but MO coefficients written for the raw contraction differ.
  auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  for (Shell& shell : wfn.shells)
    for (double& c : shell.coefficients) c *= 3.0;
  const auto scaled = read_molden_text("unnormalised.molden", to_molden(wfn, [](const Shell& s, int) {
                                         double norm2 = 0;
                                         for (std::size_t p = 0; p < s.exponents.size(); ++p)
                                           for (std::size_t q = 0; q < s.exponents.size(); ++q) {
                                             const double a = s.exponents[p], b = s.exponents[q];
                                             norm2 += s.coefficients[p] * s.coefficients[q] *
                                                      std::pow(2 * std::sqrt(a * b) / (a + b), s.l + 1.5);
                                           }
                                         return 1.0 / std::sqrt(norm2);
                                       }));
  EXPECT_EQ(scaled.normalisation.fix, "unnormalised-contractions");
  EXPECT_LT(value_difference(scaled, wfn), 1e-10);
}

TEST(OrbitalIo, NoFixWorksIsAClearError) {
  auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  wfn.alpha.coefficients[5] += 0.3;  // not a convention: just wrong
  try {
    (void)read_molden_text("broken.molden", to_molden(wfn));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "broken.molden");
    EXPECT_NE(std::string(e.what()).find("not orthonormal"), std::string::npos);
  }
  ReadOptions lenient;
  lenient.check_normalisation = false;
  EXPECT_NO_THROW((void)read_molden_text("broken.molden", to_molden(wfn), lenient));
}

TEST(OrbitalIo, UnrestrictedAlphaAndBeta) {
  auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  wfn.beta = wfn.alpha;
  for (auto* set : {&wfn.alpha, &wfn.beta})
    for (double& occ : set->occupations) occ = occ > 0 ? 1.0 : 0.0;
  const auto uhf = read_molden_text("uhf.molden", to_molden(wfn));
  EXPECT_TRUE(uhf.unrestricted());
  EXPECT_DOUBLE_EQ(uhf.electron_count(), 10.0);
  EXPECT_EQ(parse_orbital("beta:homo", uhf).spin, Spin::beta);
  EXPECT_EQ(parse_orbital("b:homo", uhf).index, 4u);
  const GridSpec grid = automatic_grid(uhf, 1.0, 0.4);
  EvaluateOptions cpu;
  cpu.backend = Backend::cpu;
  const auto spin = evaluate_density(Resources::cpu(2), uhf, grid, DensityKind::spin, cpu);
  for (float v : spin) EXPECT_NEAR(v, 0.0f, 1e-6f);  // identical alpha and beta orbitals
}

TEST(OrbitalIo, OrbitalNames) {
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  EXPECT_EQ(parse_orbital("homo", wfn).index, 4u);
  EXPECT_EQ(parse_orbital("HOMO-1", wfn).index, 3u);
  EXPECT_EQ(parse_orbital("lumo", wfn).index, 5u);
  EXPECT_EQ(parse_orbital("lumo+2", wfn).index, 7u);
  EXPECT_EQ(parse_orbital("1", wfn).index, 0u);
  EXPECT_EQ(parse_orbital("alpha:18", wfn).index, 17u);
  for (const char* bad : {"19", "0", "homo-9", "lumo+40", "beta:homo", "hom", "homo+", "x"})
    EXPECT_THROW((void)parse_orbital(bad, wfn), InputError) << bad;
}

// .fchk written from the water wavefunction: SP shells where s and p share exponents, pure d.
std::string to_fchk(const Wavefunction& wfn, bool use_sp) {
  std::ostringstream out;
  out.precision(16);
  out << "water written by the molaccel tests\nSP        RHF                                                 "
         "        6-31G(d)\n";
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
  header_i("Number of atoms", static_cast<long>(wfn.atoms.size()));
  header_i("Number of alpha electrons", 5);
  header_i("Number of beta electrons", 5);
  header_i("Number of basis functions", use_sp ? wfn.function_count() : wfn.function_count());
  std::vector<long> z;
  std::vector<double> xyz;
  for (const auto& a : wfn.atoms) {
    z.push_back(a.atomic_number);
    for (double c : a.position) xyz.push_back(c);
  }
  array_i("Atomic numbers", z);
  array_r("Current cartesian coordinates", xyz);
  std::vector<long> types, prims, atoms;
  std::vector<double> exps, coefs, sp_coefs;
  for (std::size_t s = 0; s < wfn.shells.size(); ++s) {
    const Shell& sh = wfn.shells[s];
    const bool merge = use_sp && sh.l == 0 && s + 1 < wfn.shells.size() && wfn.shells[s + 1].l == 1 &&
                       wfn.shells[s + 1].atom == sh.atom && wfn.shells[s + 1].exponents == sh.exponents;
    types.push_back(merge ? -1 : (sh.pure ? -sh.l : sh.l));
    prims.push_back(static_cast<long>(sh.exponents.size()));
    atoms.push_back(sh.atom + 1);
    for (std::size_t p = 0; p < sh.exponents.size(); ++p) {
      (void)p;
      exps.push_back(sh.exponents[p]);
      coefs.push_back(sh.coefficients[p]);
      sp_coefs.push_back(merge ? wfn.shells[s + 1].coefficients[p] : 0.0);
    }
    if (merge) ++s;
  }
  array_i("Shell types", types);
  array_i("Number of primitives per shell", prims);
  array_i("Shell to atom map", atoms);
  array_r("Primitive exponents", exps);
  array_r("Contraction coefficients", coefs);
  if (use_sp) array_r("P(S=P) Contraction coefficients", sp_coefs);
  array_r("Alpha Orbital Energies", wfn.alpha.energies);
  // Gaussian lists Cartesian g functions zzzz, yzzz, yyzz, ..., xxxx: permute from Molden order.
  static const int gaussian_g[15][3] = {{0, 0, 4}, {0, 1, 3}, {0, 2, 2}, {0, 3, 1}, {0, 4, 0},
                                        {1, 0, 3}, {1, 1, 2}, {1, 2, 1}, {1, 3, 0}, {2, 0, 2},
                                        {2, 1, 1}, {2, 2, 0}, {3, 0, 1}, {3, 1, 0}, {4, 0, 0}};
  std::vector<double> file_order = wfn.alpha.coefficients;
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  std::size_t offset = 0;
  for (const Shell& sh : wfn.shells) {
    if (sh.l == 4 && !sh.pure)
      for (int f = 0; f < 15; ++f) {
        const auto& powers = detail::cartesian_powers(4);
        int ours = 0;
        for (int c = 0; c < 15; ++c)
          if (powers[c].x == gaussian_g[f][0] && powers[c].y == gaussian_g[f][1] &&
              powers[c].z == gaussian_g[f][2])
            ours = c;
        for (std::size_t o = 0; o < wfn.alpha.count(); ++o)
          file_order[o * n + offset + f] = wfn.alpha.coefficients[o * n + offset + ours];
      }
    offset += static_cast<std::size_t>(sh.function_count());
  }
  array_r("Alpha MO coefficients", file_order);
  return out.str();
}

TEST(OrbitalIo, FchkWithSpShellsMatchesMolden) {
  const auto molden = read_molden(test::bundled("h2o_631gs.molden"));
  for (bool sp : {true, false}) {
    const auto fchk = read_fchk_text("water.fchk", to_fchk(molden, sp));
    EXPECT_EQ(fchk.function_count(), 18);
    EXPECT_EQ(fchk.normalisation.fix, "none");
    EXPECT_DOUBLE_EQ(fchk.electron_count(), 10.0);
    EXPECT_LT(value_difference(fchk, molden), 1e-7);  // 8 decimals in E16.8 fields
  }
  const auto cart = to_cartesian(molden);
  const auto cart_fchk = read_fchk_text("water-6d.fchk", to_fchk(cart, true));
  EXPECT_EQ(cart_fchk.function_count(), 19);
  EXPECT_LT(value_difference(cart_fchk, molden), 1e-7);
}

TEST(OrbitalIo, FchkCartesianAndPureFAndG) {
  // 10F/15G (Gaussian's g order) and 7F/9G, written at 8 decimals as Gaussian does.
  for (bool pure : {false, true}) {
    const auto wfn = test::orthonormal_random_wavefunction(5, 3, 6, pure);
    const auto fchk = read_fchk_text("fg.fchk", to_fchk(wfn, false));
    EXPECT_EQ(fchk.function_count(), wfn.function_count());
    EXPECT_EQ(fchk.normalisation.fix, "none");
    EXPECT_LT(value_difference(fchk, wfn), 1e-6) << (pure ? "pure" : "Cartesian");
  }
}

TEST(OrbitalIo, TruncatedAndBadInputNameFileAndLine) {
  const std::string text = read_file(test::bundled("h2o_631gs.molden"));
  // Cut inside [GTO], inside [MO], and garbage lines: each an InputError with the file name.
  for (std::size_t cut :
       {text.find("  825.2349500000"), text.find("Ene=", text.find("[MO]") + 2000) + 2, text.size() - 40}) {
    try {
      (void)read_molden_text("cut.molden", text.substr(0, cut));
      ADD_FAILURE() << "no error for a file cut at " << cut;
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), "cut.molden");
    }
  }
  std::string bad = text;
  bad.replace(bad.find("0.0018311000"), 12, "0.00183X1000");
  try {
    (void)read_molden_text("bad.molden", bad);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), 9u);  // the first primitive line of the oxygen s shell
  }
  EXPECT_THROW((void)read_molden_text("empty.molden", ""), InputError);
  EXPECT_THROW((void)read_molden_text("sto.molden", "[Molden Format]\n[STO]\n"), InputError);
  const std::string fchk = to_fchk(read_molden(test::bundled("h2o_631gs.molden")), true);
  EXPECT_THROW((void)read_fchk_text("cut.fchk", fchk.substr(0, fchk.size() / 2)), InputError);
  EXPECT_THROW((void)read_fchk_text("cut.fchk", fchk.substr(0, fchk.size() - 30)), InputError);
}

// Issue 24, defect 3: formatted checkpoint files from real runs end with a blank line.
TEST(OrbitalIo, FchkEndingWithBlankLinesIsRead) {
  const auto molden = read_molden(test::bundled("h2o_631gs.molden"));
  const std::string fchk = to_fchk(molden, true);
  for (const std::string& tail : {std::string("\n"), std::string("\n\n   \n"), std::string("\r\n\r\n")}) {
    const auto wfn = read_fchk_text("blank.fchk", fchk + tail);
    EXPECT_EQ(wfn.function_count(), 18);
    EXPECT_DOUBLE_EQ(wfn.electron_count(), 10.0);
  }
  // A blank line between two fields is skipped too.
  std::string inner = fchk;
  inner.insert(inner.find("Atomic numbers"), "\n");
  EXPECT_EQ(read_fchk_text("inner.fchk", inner).function_count(), 18);
}

// Issue 24, defect 14: negative electron counts and a field given twice were accepted.
TEST(OrbitalIo, FchkNegativeElectronCountsAndDuplicateFieldsAreErrors) {
  const std::string fchk = to_fchk(read_molden(test::bundled("h2o_631gs.molden")), true);
  auto expect_error = [](const std::string& text, std::size_t line, const std::string& what) {
    try {
      (void)read_fchk_text("w.fchk", text);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), "w.fchk");
      EXPECT_EQ(e.line(), line) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(fmt::format("w.fchk:{}: ", line), 0), 0u) << e.what();
    }
  };
  for (const char* field : {"Number of alpha electrons", "Number of beta electrons"}) {
    std::string negative = fchk;
    const auto at = negative.find(field);
    const auto eol = negative.find('\n', at);
    negative.replace(eol - 12, 12, fmt::format("{:12d}", -3));
    expect_error(negative, field[10] == 'a' ? 4 : 5, "negative number of");
  }
  // "Number of atoms" (line 3) again after the header lines.
  std::string twice = fchk;
  const std::string atoms_line =
      fchk.substr(fchk.find("Number of atoms"),
                  fchk.find('\n', fchk.find("Number of atoms")) + 1 - fchk.find("Number of atoms"));
  twice.insert(twice.find("Atomic numbers"), atoms_line);
  expect_error(twice, 7, "'Number of atoms' appears twice (first at line 3)");
}

// Issue 24, defect 14: a file neither Molden nor fchk was parsed as fchk and its bytes echoed.
TEST(OrbitalIo, NeitherMoldenNorFchkIsAClearErrorWithoutEchoingBinary) {
  molaccel::testing::TempDir dir;
  std::string binary =
      "\x7f"
      "ELF\x02\x01\x01";
  for (int i = 0; i < 300; ++i) binary.push_back(static_cast<char>((i * 37) % 256));
  binary +=
      "\nsecond\x01\x02 line\n\x1b[31m third line with a terminal escape and more than forty-four "
      "characters \x00\x07 R   N= 5\n";
  molaccel::testing::write_file(dir / "a.bin", binary);
  molaccel::testing::write_file(dir / "notes.txt",
                                "just\nsome\nnotes that are not a checkpoint file at all\n");
  molaccel::testing::write_file(dir / "one.txt", "one line\n");
  for (const char* name : {"a.bin", "notes.txt", "one.txt"}) {
    SCOPED_TRACE(name);
    try {
      (void)read_wavefunction(dir / name);
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("not a Molden or fchk file"), std::string::npos) << what;
      EXPECT_EQ(what.rfind((dir / name).string() + ":", 0), 0u) << what;
      for (char c : what) EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) << what;
    }
  }
  // read_fchk on a binary file: no echo either.
  try {
    (void)read_fchk(dir / "a.bin");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    for (char c : std::string(e.what())) EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
  }
}

// Issue 24, defect 14: a Molden file without Occup= lines gave 0 electrons silently.
TEST(OrbitalIo, MoldenWithoutOccupIsAnError) {
  const std::string text = read_file(test::bundled("h2o_631gs.molden"));
  std::string no_occup;
  std::istringstream lines(text);
  std::size_t line_no = 0, first_mo_line = 0;
  for (std::string line; std::getline(lines, line);) {
    ++line_no;
    if (first_mo_line == 0 && line.find("Ene=") != std::string::npos) first_mo_line = line_no;
    if (line.find("Occup=") != std::string::npos) {
      --line_no;
      continue;
    }
    no_occup += line + "\n";
  }
  ASSERT_GT(first_mo_line, 0u);
  try {
    (void)read_molden_text("no-occup.molden", no_occup);
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("Occup"), std::string::npos) << e.what();
    EXPECT_GT(e.line(), 0u);
    EXPECT_LE(e.line(), first_mo_line + 2) << e.what();
  }
}

// Issue 24, defect 14: a UTF-8 byte order mark before [Molden Format] (Windows editors).
TEST(OrbitalIo, MoldenAndFchkWithAByteOrderMarkAreRead) {
  molaccel::testing::TempDir dir;
  const std::string text = read_file(test::bundled("h2o_631gs.molden"));
  molaccel::testing::write_file(dir / "bom.molden", "\xEF\xBB\xBF" + text);
  EXPECT_EQ(read_wavefunction(dir / "bom.molden").function_count(), 18);
  const std::string fchk = to_fchk(read_molden(test::bundled("h2o_631gs.molden")), true);
  molaccel::testing::write_file(dir / "bom.fchk", "\xEF\xBB\xBF" + fchk);
  EXPECT_EQ(read_wavefunction(dir / "bom.fchk").function_count(), 18);
}

TEST(OrbitalIo, CubeRoundTripSingleAndMultiOrbital) {
  molaccel::testing::TempDir dir;
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  GridSpec grid = automatic_grid(wfn, 1.0, 0.5);
  EvaluateOptions cpu;
  cpu.backend = Backend::cpu;
  const std::vector<OrbitalRef> refs{parse_orbital("homo", wfn), parse_orbital("lumo", wfn)};
  const auto values = evaluate_orbitals(Resources::cpu(2), wfn, grid, refs, cpu);
  write_cube(dir / "homo.cube", wfn, grid, values.data(), "title", "homo");
  const Cube single = read_cube(dir / "homo.cube");
  ASSERT_EQ(single.values.size(), grid.point_count());
  EXPECT_EQ(single.grid.counts, grid.counts);
  EXPECT_EQ(single.atoms.size(), 3u);
  for (std::size_t p = 0; p < grid.point_count(); ++p)
    EXPECT_NEAR(single.values[p], values[p], 1e-5 * std::abs(values[p]) + 1e-30);
  write_multi_orbital_cube(dir / "both.cube", wfn, grid, values, {5, 6}, "two");
  const Cube multi = read_cube(dir / "both.cube");
  EXPECT_EQ(multi.orbital_ids, (std::vector<int>{5, 6}));
  for (std::size_t p = 0; p < grid.point_count(); p += 7)
    EXPECT_NEAR(multi.values[2 * p + 1], values[grid.point_count() + p],
                1e-5 * std::abs(values[grid.point_count() + p]) + 1e-30);
  const GridSpec like = grid_of_cube(dir / "homo.cube");
  for (int d = 0; d < 3; ++d) EXPECT_NEAR(like.origin[d], grid.origin[d], 1e-6);
  // A truncated cube is an error naming the file.
  const std::string text = read_file(dir / "homo.cube");
  molaccel::testing::write_file(dir / "cut.cube", text.substr(0, text.size() / 2));
  EXPECT_THROW((void)read_cube(dir / "cut.cube"), InputError);
  // A header declaring 10^9 points with two values after it: truncated, and no 8 GB reservation
  // first (a fuzzer find: the reader reserved what the header declared).
  const std::string huge =
      "title\ncomment\n    1    0.0    0.0    0.0\n 1000    0.1    0.0    0.0\n 1000    0.0    0.1    0.0\n"
      " 1000    0.0    0.0    0.1\n    1    1.0    0.0    0.0    0.0\n 1.0 2.0\n";
  EXPECT_THROW((void)read_cube_text("huge.cube", huge), InputError);
}

TEST(OrbitalIo, GridsInAngstrom) {
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.1);
  EXPECT_NEAR(grid.axes[0][0] * bohr_in_angstrom, 0.1, 1e-12);
  // Box: atom extent + 2 x 3 A, rounded up to whole steps.
  EXPECT_NEAR(grid.origin[2] * bohr_in_angstrom, wfn.atoms[1].position[2] * bohr_in_angstrom - 3.0, 1e-9);
  EXPECT_GE((grid.counts[1] - 1) * 0.1, 2 * 1.430522676972 * bohr_in_angstrom + 6.0 - 1e-9);
  const GridSpec ex = explicit_grid({-1, -1, -1}, {2, 2, 2}, 0.5);
  EXPECT_EQ(ex.counts, (std::array<std::size_t, 3>{5, 5, 5}));
  EXPECT_THROW((void)explicit_grid({0, 0, 0}, {1, 1, 1}, 0.0), InputError);
}

}  // namespace
}  // namespace molaccel::orbital
