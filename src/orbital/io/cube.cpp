// Gaussian cube files: reading (plain or gzip; single field or multi-orbital) and atomic writing,
// the values formatted on every core.
// A negative point count on an axis line means the axis is in angstrom (converted to bohr here).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>

#include "molaccel/orbital.hpp"
#include "orbital/io/parse_util.hpp"
#include "runtime/parallel_writer.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::orbital {

using io_util::parse_double;
using io_util::parse_long;
using io_util::split;

namespace {

Cube parse_cube(io::LineReader& in) {
  Cube cube;
  std::string_view line;
  if (!in.next(line)) in.fail("empty cube file");
  cube.comment1 = std::string(line);
  if (!in.next(line)) in.fail("truncated cube header");
  cube.comment2 = std::string(line);
  auto numbers = [&](std::size_t at_least, const char* what) {
    std::string_view l;
    if (!in.next(l)) in.fail(fmt::format("truncated cube header: missing {}", what));
    const auto fields = split(l);
    if (fields.size() < at_least) in.fail(fmt::format("{} line needs {} numbers", what, at_least));
    std::vector<double> out;
    for (std::size_t i = 0; i < at_least; ++i) {
      double v = 0;
      if (!parse_double(fields[i], v)) in.fail(fmt::format("bad number '{}' in {} line", fields[i], what));
      out.push_back(v);
    }
    return out;
  };
  const auto head = numbers(4, "atom count and origin");
  if (std::abs(head[0]) > 1e6) in.fail("bad atom count");
  const long n_atoms_signed = static_cast<long>(head[0]);
  if (head[0] != static_cast<double>(n_atoms_signed) || std::abs(n_atoms_signed) > 1000000)
    in.fail("bad atom count");
  const std::size_t n_atoms = static_cast<std::size_t>(std::abs(n_atoms_signed));
  for (int d = 0; d < 3; ++d) cube.grid.origin[d] = head[1 + d];
  bool angstrom = false;
  for (int axis = 0; axis < 3; ++axis) {
    const auto v = numbers(4, "axis");
    if (std::abs(v[0]) > 1e5) in.fail("bad point count on axis line");
    const long n = static_cast<long>(v[0]);
    if (v[0] != static_cast<double>(n) || n == 0 || std::abs(n) > 100000)
      in.fail("bad point count on axis line");
    if (n < 0) angstrom = true;
    cube.grid.counts[axis] = static_cast<std::size_t>(std::abs(n));
    for (int d = 0; d < 3; ++d) cube.grid.axes[axis][d] = v[1 + d];
  }
  for (int d = 0; d < 3; ++d)
    if (!std::isfinite(cube.grid.origin[d])) in.fail("the grid origin is not a finite number");
  for (const auto& axis : cube.grid.axes)
    for (double x : axis)
      if (!std::isfinite(x)) in.fail("a grid axis is not a finite number");
  // Three axes that span no volume (a zero or repeated axis) describe no grid.
  if (!(cube.grid.voxel_volume() > 0)) in.fail("the grid axes span no volume (a zero or parallel axis)");
  if (angstrom) {
    for (int d = 0; d < 3; ++d) cube.grid.origin[d] /= bohr_in_angstrom;
    for (auto& axis : cube.grid.axes)
      for (double& x : axis) x /= bohr_in_angstrom;
  }
  for (std::size_t a = 0; a < n_atoms; ++a) {
    const auto v = numbers(5, "atom");
    Atom atom;
    if (!(v[0] >= 0 && v[0] <= 200)) in.fail("bad atomic number on atom line");
    atom.atomic_number = static_cast<int>(v[0]);
    atom.charge = v[1];
    for (int d = 0; d < 3; ++d) atom.position[d] = v[2 + d] / (angstrom ? bohr_in_angstrom : 1.0);
    cube.atoms.push_back(atom);
  }
  std::vector<double> pending;  // numbers already read from the line after the header
  if (n_atoms_signed < 0) {
    if (!in.next(line)) in.fail("truncated: missing orbital list");
    const auto fields = split(line);
    long count = 0;
    if (fields.empty() || !parse_long(fields[0], count) || count < 1 || count > 100000)
      in.fail("bad orbital count");
    std::size_t have = fields.size() - 1;
    for (std::size_t i = 1; i < fields.size() && cube.orbital_ids.size() < static_cast<std::size_t>(count);
         ++i) {
      long id = 0;
      if (!parse_long(fields[i], id)) in.fail("bad orbital number");
      cube.orbital_ids.push_back(static_cast<int>(id));
    }
    while (cube.orbital_ids.size() < static_cast<std::size_t>(count)) {
      if (!in.next(line)) in.fail("truncated orbital list");
      for (auto field : split(line)) {
        long id = 0;
        if (!parse_long(field, id)) in.fail("bad orbital number");
        cube.orbital_ids.push_back(static_cast<int>(id));
      }
    }
    (void)have;
  }
  const std::size_t fields_per_point = std::max<std::size_t>(1, cube.orbital_ids.size());
  const std::size_t total = cube.grid.point_count() * fields_per_point;
  if (total > 2'000'000'000) in.fail("cube too large");
  // Reserve no more than the header could be honest about: a short file that declares a huge
  // grid must fail as truncated, not allocate gigabytes first (found by fuzz_orbital_cube). The
  // vector grows as values arrive beyond that.
  cube.values.reserve(std::min<std::size_t>(total, std::size_t{1} << 20));
  while (cube.values.size() < total && in.next(line)) {
    for (auto field : split(line)) {
      double v = 0;
      if (!parse_double(field, v)) in.fail(fmt::format("bad value '{}'", field));
      if (cube.values.size() >= total) in.fail("more values than the grid holds");
      cube.values.push_back(v);
    }
  }
  if (cube.values.size() != total)
    in.fail(fmt::format("truncated: {} of {} values", cube.values.size(), total));
  return cube;
}

}  // namespace

Cube read_cube(const std::filesystem::path& path) {
  io::LineReader in(path);
  return parse_cube(in);
}

Cube read_cube_text(std::string_view name, std::string_view content) {
  io::LineReader in(name, content);
  return parse_cube(in);
}

namespace {

void write_header(std::FILE* f, const Wavefunction& wfn, const GridSpec& grid, std::string_view title,
                  std::string_view description, bool multi) {
  std::fprintf(f, "%.*s\n%.*s\n", static_cast<int>(title.size()), title.data(),
               static_cast<int>(description.size()), description.data());
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

// The exact powers of ten of a double, 10^0 .. 10^22.
constexpr double kPow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// a * 10^k for |k| <= 44: one or two correctly rounded operations, so a relative error of at most
// about 2^-52.
double scale10(double a, int k) {
  if (k >= 0) return k <= 22 ? a * kPow10[k] : (a * kPow10[22]) * kPow10[k - 22];
  k = -k;
  return k <= 22 ? a / kPow10[k] : (a / kPow10[22]) / kPow10[k - 22];
}

// printf's "%.5E" digits of a > 0: the 6 significant digits (100000..999999) and the decimal
// exponent, correctly rounded. The quick way scales a into [1e5, 1e6] in double and rounds; its
// error (below 3e-10 there) can only change the result where the scaled value lies within that of
// a half, so there it gives up (false) and to_chars decides. tests/orbital/test_cube_writer.cpp
// compares it with printf on every float of several binades and on rounding boundaries.
bool six_digits(double a, std::uint32_t& digits, int& exponent) {
  if (!(a >= 1e-300 && a <= 1e300)) return false;
  // From the binary exponent b (a in [2^b, 2^(b+1))): floor(b log10 2) within one of log10(a).
  std::uint64_t bits = 0;
  std::memcpy(&bits, &a, sizeof bits);
  const int b = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  int e = (b * 78913) >> 18;  // 78913 / 2^18 = log10(2) to 3e-6 relative
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (5 - e > 44 || 5 - e < -44) return false;
    const double s = scale10(a, 5 - e);
    const double whole = std::floor(s), fraction = s - whole;
    if (std::fabs(fraction - 0.5) < 1e-8) return false;  // too near a tie to tell
    std::uint64_t m = static_cast<std::uint64_t>(whole) + (fraction > 0.5 ? 1 : 0);
    if (m < 100000) {
      --e;
    } else if (m > 1000000) {
      ++e;
    } else {
      if (m == 1000000) {  // rounded up to the next power of ten
        m = 100000;
        ++e;
      }
      digits = static_cast<std::uint32_t>(m);
      exponent = e;
      return true;
    }
  }
  return false;
}

// " %12.5E" of `v`, exactly as printf writes it: six_digits where it is sure (3x faster than
// to_chars), else std::to_chars with a precision, which is specified to give printf's digits;
// NaN and infinities (spelled differently by to_chars) through snprintf itself.
void append_cube_number(std::string& text, double v) {
  char out[32];
  std::size_t length = 0;
  std::uint32_t m = 0;
  int e = 0;
  if (v == 0 && !std::signbit(v)) {
    std::memcpy(out, "0.00000E+00", 11);
    length = 11;
  } else if (six_digits(std::fabs(v), m, e)) {  // false for 0, NaN and infinities
    if (v < 0) out[length++] = '-';
    char d[6];
    for (int i = 5; i >= 0; --i, m /= 10) d[i] = static_cast<char>('0' + m % 10);
    out[length++] = d[0];
    out[length++] = '.';
    std::memcpy(out + length, d + 1, 5);
    length += 5;
    out[length++] = 'E';
    out[length++] = e < 0 ? '-' : '+';
    unsigned magnitude = static_cast<unsigned>(e < 0 ? -e : e);
    if (magnitude >= 100) {
      out[length++] = static_cast<char>('0' + magnitude / 100);
      magnitude %= 100;
    }
    out[length++] = static_cast<char>('0' + magnitude / 10);
    out[length++] = static_cast<char>('0' + magnitude % 10);
  } else if (std::isfinite(v)) {
    const auto result = std::to_chars(out, out + sizeof out, v, std::chars_format::scientific, 5);
    length = static_cast<std::size_t>(result.ptr - out);
    for (std::size_t i = length - 3; i > 0; --i)  // the exponent's 'e' is at least 3 from the end
      if (out[i] == 'e') {
        out[i] = 'E';
        break;
      }
  } else {
    length = static_cast<std::size_t>(std::snprintf(out, sizeof out, "%.5E", v));
  }
  text.append(1 + (length < 12 ? 12 - length : 0), ' ');
  text.append(out, length);
}

// The grid's value lines, formatted on every core in blocks of whole rows (row = one (i, j) line of
// z values) and written in order. `row_values` is the number of values per row, for the block size.
void write_rows(std::FILE* f, const std::filesystem::path& path, const GridSpec& grid, std::size_t row_values,
                const std::function<void(std::size_t row, std::string& text)>& format_row) {
  const std::size_t rows = grid.counts[0] * grid.counts[1];
  const std::size_t rows_per_block =
      std::max<std::size_t>(1, (std::size_t{1} << 16) / std::max<std::size_t>(1, row_values));
  io::write_blocks_in_order(f, path.string(), (rows + rows_per_block - 1) / rows_per_block, 0,
                            [&](std::size_t block, std::string& text) {
                              text.reserve(14 * rows_per_block * row_values);
                              const std::size_t end = std::min(rows, (block + 1) * rows_per_block);
                              for (std::size_t row = block * rows_per_block; row < end; ++row)
                                format_row(row, text);
                            });
}

}  // namespace

void write_cube(const std::filesystem::path& path, const Wavefunction& wfn, const GridSpec& grid,
                const float* values, std::string_view title, std::string_view description) {
  const std::size_t nz = grid.counts[2];
  write_file_atomically(path, [&](std::FILE* f) {
    write_header(f, wfn, grid, title, description, false);
    write_rows(f, path, grid, nz, [&](std::size_t row, std::string& text) {
      const float* v = values + row * nz;
      for (std::size_t k = 0; k < nz; ++k) {
        append_cube_number(text, static_cast<double>(v[k]));
        if (k % 6 == 5 || k + 1 == nz) text += '\n';
      }
    });
  });
}

void write_multi_orbital_cube(const std::filesystem::path& path, const Wavefunction& wfn,
                              const GridSpec& grid, const std::vector<float>& values,
                              const std::vector<int>& orbital_numbers, std::string_view title) {
  const std::size_t n_points = grid.point_count();
  const std::size_t n_orb = orbital_numbers.size();
  MOLACCEL_EXPECTS(values.size() == n_points * n_orb, "multi-orbital cube: value count mismatch");
  const std::size_t nz = grid.counts[2];
  const std::size_t per_row = nz * n_orb;
  write_file_atomically(path, [&](std::FILE* f) {
    write_header(f, wfn, grid, title, "MO coefficients", true);
    std::fprintf(f, "%5zu", n_orb);
    for (std::size_t o = 0; o < n_orb; ++o)
      std::fprintf(f, (o % 9 == 8 && o + 1 < n_orb) ? " %5d\n" : " %5d", orbital_numbers[o]);
    std::fprintf(f, "\n");
    write_rows(f, path, grid, per_row, [&](std::size_t row, std::string& text) {
      std::size_t written = 0;
      for (std::size_t k = 0; k < nz; ++k)
        for (std::size_t o = 0; o < n_orb; ++o) {
          append_cube_number(text, static_cast<double>(values[o * n_points + row * nz + k]));
          ++written;
          if (written % 6 == 0 || written == per_row) text += '\n';
        }
    });
  });
}

}  // namespace molaccel::orbital
