// Matrix Market reader and writer: coordinate and array formats; real, integer and pattern
// fields; general, symmetric and skew-symmetric matrices. Every error names the line.
#include "linalg/io/matrix_market.hpp"
#include "runtime/parallel_writer.hpp"
#include "runtime/resource_limits.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

namespace molaccel::linalg::io {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

bool blank_or_comment(std::string_view line) {
  for (char c : line) {
    if (c == '%') return true;
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

std::uint64_t parse_count(molaccel::io::LineReader& r, std::string_view tok, const char* what) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (ec != std::errc() || p != tok.data() + tok.size())
    r.fail(fmt::format("{} must be a non-negative integer, got '{}'", what, tok));
  return v;
}

double parse_value(molaccel::io::LineReader& r, std::string_view tok, bool integer) {
  double v = 0;
  if (integer) {
    long long i = 0;
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), i);
    if (ec != std::errc() || p != tok.data() + tok.size()) r.fail(fmt::format("bad integer value '{}'", tok));
    return static_cast<double>(i);
  }
  auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (ec != std::errc() || p != tok.data() + tok.size()) r.fail(fmt::format("bad real value '{}'", tok));
  if (!std::isfinite(v)) r.fail(fmt::format("value '{}' is not finite", tok));
  return v;
}

// Memory that reading the announced matrix takes at its peak (to_csr): per stored entry the
// triplet (row, col, value: 16 bytes), the sort order (8) and the CSR entry (12), mirrored
// entries of symmetric matrices counted twice; plus the CSR row pointers.
double reading_bytes(std::uint64_t rows, std::uint64_t entries, bool symmetric) {
  return static_cast<double>(entries) * (symmetric ? 2.0 : 1.0) * (16.0 + 8.0 + 12.0) +
         4.0 * static_cast<double>(rows + 1);
}

}  // namespace

MatrixMarketTriplets parse_triplets(molaccel::io::LineReader& r) {
  std::string_view line;
  if (!r.next(line)) r.fail("empty file: expected a %%MatrixMarket header");
  const auto head = split(line);
  if (head.size() != 5 || lower(head[0]) != "%%matrixmarket" || lower(head[1]) != "matrix")
    r.fail("expected '%%MatrixMarket matrix <format> <field> <symmetry>'");
  const std::string format = lower(head[2]), field = lower(head[3]), symmetry = lower(head[4]);
  if (format != "coordinate" && format != "array")
    r.fail("format must be coordinate or array, got '" + format + "'");
  if (field != "real" && field != "integer" && field != "pattern" && field != "double")
    r.fail("field '" + field + "' is not supported (real, integer, pattern)");
  if (symmetry != "general" && symmetry != "symmetric" && symmetry != "skew-symmetric")
    r.fail("symmetry '" + symmetry + "' is not supported (general, symmetric, skew-symmetric)");
  const bool pattern = field == "pattern", integer = field == "integer";
  const bool array = format == "array";
  if (array && pattern) r.fail("a pattern matrix cannot be in array format");

  do {
    if (!r.next(line)) r.fail("missing size line");
  } while (blank_or_comment(line));
  const auto size = split(line);
  if (size.size() != (array ? 2u : 3u))
    r.fail(array ? "size line must be 'rows cols'" : "size line must be 'rows cols nonzeros'");
  constexpr std::uint64_t limit = std::numeric_limits<std::int32_t>::max();
  MatrixMarketTriplets t;
  t.array_format = array;
  const std::uint64_t rows = parse_count(r, size[0], "rows"), cols = parse_count(r, size[1], "cols");
  if (rows > limit || cols > limit) r.fail("dimensions exceed 2^31-1");
  t.rows = rows;
  t.cols = cols;
  const bool symmetric = symmetry != "general";
  if (symmetric && rows != cols) r.fail("a symmetric matrix must be square");
  std::uint64_t expected = 0;
  if (array) {
    expected = symmetric ? (symmetry == "symmetric" ? rows * (rows + 1) / 2 : rows * (rows - (rows > 0)) / 2)
                         : rows * cols;
  } else {
    expected = parse_count(r, size[2], "nonzeros");
  }
  if (expected > limit) r.fail("more than 2^31-1 entries");
  // Refused up front, with the numbers, rather than failing with std::bad_alloc part-way (the
  // system is only asked above 1 GiB: small inputs never read /proc/meminfo).
  if (const double need = reading_bytes(rows, expected, symmetric); need > double(1u << 30)) {
    const std::uint64_t available = molaccel::detail::available_memory().value_or(0);
    if (available > 0 && need > static_cast<double>(available))
      r.fail(fmt::format(
          "a {} x {} matrix with {} {}entries needs about {:.1f} GiB of memory to read and {:.1f} "
          "GiB are available",
          rows, cols, expected, symmetric ? "stored (mirrored: twice as many) " : "", need / double(1u << 30),
          static_cast<double>(available) / double(1u << 30)));
  }
  const std::size_t reserve = static_cast<std::size_t>(std::min<std::uint64_t>(expected, 1u << 20));
  t.row.reserve(reserve);
  t.col.reserve(reserve);
  t.value.reserve(reserve);

  auto add = [&](std::uint64_t i, std::uint64_t j, double v) {
    t.row.push_back(static_cast<std::int32_t>(i));
    t.col.push_back(static_cast<std::int32_t>(j));
    t.value.push_back(v);
    if (symmetric && i != j) {
      t.row.push_back(static_cast<std::int32_t>(j));
      t.col.push_back(static_cast<std::int32_t>(i));
      t.value.push_back(symmetry == "skew-symmetric" ? -v : v);
    }
  };

  std::uint64_t seen = 0;
  std::uint64_t array_row = 0, array_col = 0;  // next array position (column-major)
  if (array && symmetry == "skew-symmetric") array_row = 1;
  while (r.next(line)) {
    if (blank_or_comment(line)) continue;
    if (seen == expected) r.fail(fmt::format("more entries than the {} announced", expected));
    const auto tok = split(line);
    if (array) {
      if (tok.size() != 1) r.fail("array entries have one value per line");
      const double v = parse_value(r, tok[0], integer);
      if (v != 0) add(array_row, array_col, v);
      ++array_row;
      if (array_row == rows) {
        ++array_col;
        array_row = symmetric ? array_col + (symmetry == "skew-symmetric") : 0;
      }
    } else {
      if (tok.size() != (pattern ? 2u : 3u))
        r.fail(pattern ? "pattern entries are 'row col'" : "entries are 'row col value'");
      const std::uint64_t i = parse_count(r, tok[0], "row index"), j = parse_count(r, tok[1], "column index");
      if (i < 1 || i > rows || j < 1 || j > cols)
        r.fail(fmt::format("entry ({}, {}) outside the {} x {} matrix", i, j, rows, cols));
      if (symmetric && j > i)
        r.fail(fmt::format("entry ({}, {}) above the diagonal of a symmetric matrix", i, j));
      if (symmetry == "skew-symmetric" && i == j) r.fail("a skew-symmetric matrix has no diagonal entries");
      add(i - 1, j - 1, pattern ? 1.0 : parse_value(r, tok[2], integer));
    }
    ++seen;
  }
  if (seen != expected) r.fail(fmt::format("file ends after {} of {} entries", seen, expected));
  return t;
}

HostCsr<double> to_csr(const MatrixMarketTriplets& t) {
  HostCsr<double> a;
  a.rows = t.rows;
  a.cols = t.cols;
  std::vector<std::size_t> order(t.value.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return t.row[x] != t.row[y] ? t.row[x] < t.row[y] : t.col[x] < t.col[y];
  });
  a.row_ptr.assign(t.rows + 1, 0);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t e = order[k];
    if (k > 0 && t.row[order[k - 1]] == t.row[e] && t.col[order[k - 1]] == t.col[e]) {
      a.values.back() += t.value[e];  // duplicates are summed, as the format intends
      continue;
    }
    a.col_idx.push_back(t.col[e]);
    a.values.push_back(t.value[e]);
    a.row_ptr[t.row[e] + 1]++;
  }
  for (std::size_t r = 0; r < t.rows; ++r) a.row_ptr[r + 1] += a.row_ptr[r];
  return a;
}

}  // namespace molaccel::linalg::io

namespace molaccel::linalg {

HostCsr<double> read_matrix_market(const std::filesystem::path& path) {
  molaccel::io::LineReader reader(path);
  return io::to_csr(io::parse_triplets(reader));
}

HostCsr<double> parse_matrix_market(std::string_view name, std::string_view content) {
  molaccel::io::LineReader reader(name, content);
  return io::to_csr(io::parse_triplets(reader));
}

std::vector<double> read_matrix_market_vector(const std::filesystem::path& path) {
  molaccel::io::LineReader reader(path);
  const auto t = io::parse_triplets(reader);
  if (t.rows != 1 && t.cols != 1)
    throw InputError(path.string(), 0,
                     fmt::format("expected a vector (n x 1), got a {} x {} matrix", t.rows, t.cols), __FILE__,
                     __LINE__);
  std::vector<double> v(std::max(t.rows, t.cols), 0.0);
  for (std::size_t k = 0; k < t.value.size(); ++k) v[t.cols == 1 ? t.row[k] : t.col[k]] += t.value[k];
  return v;
}

void write_matrix_market_vector(const std::filesystem::path& path, std::span<const double> x,
                                std::string_view comment) {
  // The values as blocks of 65,536 lines formatted on every core and written in order (gzip or
  // Zstandard members for a .gz or .zst name), the header in the first block.
  constexpr std::size_t kBlock = 65536;
  const auto compression = molaccel::io::compression_for(path);
  write_file_atomically(path, [&](std::FILE* f) {
    const std::size_t blocks = std::max<std::size_t>(1, (x.size() + kBlock - 1) / kBlock);
    molaccel::io::write_blocks_in_order(
        f, path.string(), blocks, 0,
        [&](std::size_t block, std::string& text) {
          auto out = std::back_inserter(text);
          if (block == 0) {
            fmt::format_to(out, "%%MatrixMarket matrix array real general\n");
            if (!comment.empty()) fmt::format_to(out, "% {}\n", comment);
            fmt::format_to(out, "{} 1\n", x.size());
          }
          const std::size_t end = std::min(x.size(), (block + 1) * kBlock);
          text.reserve(text.size() + 24 * (end - std::min(end, block * kBlock)));
          for (std::size_t i = block * kBlock; i < end; ++i) fmt::format_to(out, "{:.17g}\n", x[i]);
        },
        compression);
  });
}

HostCsr<double> poisson_2d(std::size_t n) {
  MOLACCEL_EXPECTS(n >= 1 && n * n <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() / 5),
                   "poisson_2d: grid too large for 32-bit indices");
  HostCsr<double> a;
  a.rows = a.cols = n * n;
  a.row_ptr.assign(1, 0);
  a.row_ptr.reserve(n * n + 1);
  a.col_idx.reserve(5 * n * n);
  a.values.reserve(5 * n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const auto k = static_cast<std::int32_t>(i * n + j);
      auto put = [&](std::int32_t c, double v) {
        a.col_idx.push_back(c);
        a.values.push_back(v);
      };
      if (i > 0) put(k - static_cast<std::int32_t>(n), -1.0);
      if (j > 0) put(k - 1, -1.0);
      put(k, 4.0);
      if (j + 1 < n) put(k + 1, -1.0);
      if (i + 1 < n) put(k + static_cast<std::int32_t>(n), -1.0);
      a.row_ptr.push_back(static_cast<std::int32_t>(a.values.size()));
    }
  return a;
}

std::vector<double> multiply(const HostCsr<double>& a, std::span<const double> x) {
  MOLACCEL_EXPECTS(x.size() == a.cols, "multiply: length mismatch");
  std::vector<double> y(a.rows, 0.0);
  for (std::size_t r = 0; r < a.rows; ++r) {
    double s = 0;
    for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) s += a.values[k] * x[a.col_idx[k]];
    y[r] = s;
  }
  return y;
}

}  // namespace molaccel::linalg
