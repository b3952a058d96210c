// The parallel cube writer against a serial printf writer (the format as Gaussian's cube
// documentation gives it): the same bytes for random grids, every float bit pattern class included
// (negative zero, denormals, NaN, infinities, decimal ties at the 6th digit), single and
// multi-orbital cubes.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <random>

#include <gtest/gtest.h>

#include "molaccel/orbital.hpp"
#include "testing/testing.hpp"

namespace molaccel::orbital {
namespace {

using molaccel::testing::read_file;
using molaccel::testing::TempDir;

void serial_header(std::FILE* f, const Wavefunction& wfn, const GridSpec& grid, const char* title,
                   const char* description, bool multi) {
  std::fprintf(f, "%s\n%s\n", title, description);
  const long n_atoms = static_cast<long>(wfn.atoms.size());
  std::fprintf(f, "%5ld %12.6f %12.6f %12.6f\n", multi ? -n_atoms : n_atoms, grid.origin[0], grid.origin[1],
               grid.origin[2]);
  for (int a = 0; a < 3; ++a)
    std::fprintf(f, "%5zu %12.6f %12.6f %12.6f\n", grid.counts[a], grid.axes[a][0], grid.axes[a][1],
                 grid.axes[a][2]);
  for (const Atom& atom : wfn.atoms)
    std::fprintf(f, "%5d %12.6f %12.6f %12.6f %12.6f\n", atom.atomic_number, atom.charge, atom.position[0],
                 atom.position[1], atom.position[2]);
}

std::string serial_cube(const std::filesystem::path& path, const Wavefunction& wfn, const GridSpec& grid,
                        const std::vector<float>& values) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  serial_header(f, wfn, grid, "title", "description", false);
  const std::size_t nz = grid.counts[2];
  for (std::size_t row = 0; row < grid.counts[0] * grid.counts[1]; ++row)
    for (std::size_t k = 0; k < nz; ++k)
      std::fprintf(f, (k % 6 == 5 || k + 1 == nz) ? " %12.5E\n" : " %12.5E",
                   static_cast<double>(values[row * nz + k]));
  std::fclose(f);
  return read_file(path);
}

std::string serial_multi_cube(const std::filesystem::path& path, const Wavefunction& wfn,
                              const GridSpec& grid, const std::vector<float>& values,
                              const std::vector<int>& orbitals) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  serial_header(f, wfn, grid, "title", "MO coefficients", true);
  const std::size_t n_orb = orbitals.size(), n_points = grid.point_count(), nz = grid.counts[2];
  std::fprintf(f, "%5zu", n_orb);
  for (std::size_t o = 0; o < n_orb; ++o)
    std::fprintf(f, (o % 9 == 8 && o + 1 < n_orb) ? " %5d\n" : " %5d", orbitals[o]);
  std::fprintf(f, "\n");
  for (std::size_t row = 0; row < grid.counts[0] * grid.counts[1]; ++row) {
    std::size_t written = 0;
    for (std::size_t k = 0; k < nz; ++k)
      for (std::size_t o = 0; o < n_orb; ++o) {
        ++written;
        std::fprintf(f, (written % 6 == 0 || written == nz * n_orb) ? " %12.5E\n" : " %12.5E",
                     static_cast<double>(values[o * n_points + row * nz + k]));
      }
  }
  std::fclose(f);
  return read_file(path);
}

// Values of every kind: random bit patterns (NaN payloads, infinities, denormals, both zeros),
// ordinary magnitudes, and dyadic values whose 7th significant digit is an exact 5 (printf rounds
// those ties to even).
std::vector<float> awkward_values(std::mt19937& rng, std::size_t count) {
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            1.015625f,
                            -1.015625f,
                            9.9999949e-5f,
                            9.999995e9f,
                            0.5f};
  std::vector<float> v(count);
  for (auto& x : v) {
    switch (rng() % 4) {
      case 0:
        x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
        break;
      case 1:
        x = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
        break;
      case 2:
        x = static_cast<float>(static_cast<int>(rng() % 2000001) - 1000000) / 64.0f;
        break;
      default:
        x = specials[rng() % std::size(specials)];
    }
  }
  return v;
}

Wavefunction two_atoms() {
  Wavefunction wfn;
  wfn.atoms.push_back({.atomic_number = 8, .label = "O", .position = {0.1, -0.2, 0.3}, .charge = 8});
  wfn.atoms.push_back({.atomic_number = 1, .label = "H", .position = {1.5, 0.25, -7.125}, .charge = 1});
  return wfn;
}

GridSpec grid_of(std::size_t nx, std::size_t ny, std::size_t nz) {
  GridSpec grid;
  grid.origin = {-1.25, 0.5, 3.0};
  grid.axes = {{{0.2, 0, 0}, {0, 0.3, 0}, {0.01, 0, 0.4}}};
  grid.counts = {nx, ny, nz};
  return grid;
}

TEST(CubeWriter, SameBytesAsSerialPrintf) {
  TempDir dir;
  std::mt19937 rng(42);
  const Wavefunction wfn = two_atoms();
  // Row lengths around the 6-per-line wrap, one point, and grids of many formatted blocks.
  for (auto counts : std::vector<std::array<std::size_t, 3>>{{1, 1, 1},
                                                             {2, 3, 5},
                                                             {3, 2, 6},
                                                             {4, 5, 7},
                                                             {1, 1, 13},
                                                             {7, 9, 131},
                                                             {40, 50, 61},
                                                             {3, 1, 70001}}) {
    const GridSpec grid = grid_of(counts[0], counts[1], counts[2]);
    const auto values = awkward_values(rng, grid.point_count());
    write_cube(dir / "fast.cube", wfn, grid, values.data(), "title", "description");
    EXPECT_EQ(read_file(dir / "fast.cube"), serial_cube(dir / "serial.cube", wfn, grid, values))
        << counts[0] << "x" << counts[1] << "x" << counts[2];
  }
}

TEST(CubeWriter, MultiOrbitalSameBytesAsSerialPrintf) {
  TempDir dir;
  std::mt19937 rng(7);
  const Wavefunction wfn = two_atoms();
  for (std::size_t n_orb : {1u, 2u, 5u, 11u}) {
    const GridSpec grid = grid_of(3, 4, 17);
    const auto values = awkward_values(rng, grid.point_count() * n_orb);
    std::vector<int> orbitals(n_orb);
    for (std::size_t o = 0; o < n_orb; ++o) orbitals[o] = static_cast<int>(3 * o + 1);
    write_multi_orbital_cube(dir / "fast.cube", wfn, grid, values, orbitals, "title");
    EXPECT_EQ(read_file(dir / "fast.cube"),
              serial_multi_cube(dir / "serial.cube", wfn, grid, values, orbitals))
        << n_orb << " orbitals";
  }
}

// The number formatting on its own, against printf: every 13th float of several binades (values near
// 1, the smallest and largest floats, tiny and large magnitudes) and the neighbours of rounding
// boundaries (x.999995 and x.000005 times every power of ten, integers that are decimal ties).
TEST(CubeWriter, EveryFloatOfSeveralBinadesAsPrintf) {
  TempDir dir;
  const Wavefunction wfn = two_atoms();
  std::vector<float> values;
  for (std::uint32_t exponent : {1u, 127u - 67u, 127u - 31u, 127u, 127u + 17u, 253u})
    for (std::uint32_t mantissa = 0; mantissa < (1u << 23); mantissa += 13)
      values.push_back(std::bit_cast<float>(exponent << 23 | mantissa));
  for (int p = -45; p <= 38; ++p)
    for (double lead : {1.0, 9.999995, 1.000005, 2.5, 1.234565}) {
      float f = static_cast<float>(lead * std::pow(10.0, p));
      for (int step = 0; step < 8; ++step) f = std::nextafter(f, 0.0f);
      for (int step = 0; step < 16; ++step, f = std::nextafter(f, 1e38f)) {
        values.push_back(f);
        values.push_back(-f);
      }
    }
  for (std::uint32_t i = 999000; i < 1001000; ++i) values.push_back(static_cast<float>(i) * 10.0f);
  const GridSpec grid = grid_of(1, 1, values.size());
  write_cube(dir / "fast.cube", wfn, grid, values.data(), "title", "description");
  const std::string fast = read_file(dir / "fast.cube"),
                    serial = serial_cube(dir / "serial.cube", wfn, grid, values);
  ASSERT_EQ(fast.size(), serial.size());
  EXPECT_TRUE(fast == serial) << "first difference at byte "
                              << std::mismatch(fast.begin(), fast.end(), serial.begin()).first - fast.begin();
}

}  // namespace
}  // namespace molaccel::orbital
