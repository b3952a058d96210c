// Alphabet, substitution matrices (built-in and NCBI text files) and Karlin-Altschul statistics.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "align/builtin_tables.hpp"
#include "molaccel/align.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::align {
namespace {

constexpr std::array<std::int8_t, 256> make_code_table() {
  std::array<std::int8_t, 256> table{};
  for (auto& v : table) v = -1;
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
    const auto upper = static_cast<unsigned char>(kAlphabet[i]);
    table[upper] = static_cast<std::int8_t>(i);
    if (upper >= 'A' && upper <= 'Z') table[upper - 'A' + 'a'] = static_cast<std::int8_t>(i);
  }
  return table;
}
constexpr auto kCodeTable = make_code_table();

std::string upper(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

int encode_residue(char letter) noexcept {
  return kCodeTable[static_cast<unsigned char>(letter)];
}

char decode_residue(std::uint8_t code) noexcept {
  return code < kAlphabet.size() ? kAlphabet[code] : '?';
}

int ScoringMatrix::max_score() const noexcept {
  int best = std::numeric_limits<int>::min();
  for (int a = 0; a < kAlphabetSize; ++a)
    for (int b = 0; b < kAlphabetSize; ++b) best = std::max(best, at(a, b));
  return best;
}

int ScoringMatrix::min_score() const noexcept {
  int worst = std::numeric_limits<int>::max();
  for (int a = 0; a < kAlphabetSize; ++a)
    for (int b = 0; b < kAlphabetSize; ++b) worst = std::min(worst, at(a, b));
  return worst;
}

ScoringMatrix parse_matrix(std::string_view source_name, std::string_view text) {
  // Scores must stay small: the 16-bit kernels pad with -1024 and detect saturation near 32767.
  constexpr int kMaxAbsScore = 127;
  io::LineReader reader(source_name, text);
  std::string_view line;
  std::vector<int> columns;  // residue code per header column
  std::array<bool, kMatrixStride> row_seen{};
  std::array<bool, kMatrixStride> column_seen{};
  ScoringMatrix matrix;
  matrix.name = std::string(source_name);
  auto tokens_of = [](std::string_view s) {
    std::vector<std::string_view> tokens;
    std::size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      std::size_t j = i;
      while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j > i) tokens.push_back(s.substr(i, j - i));
      i = j;
    }
    return tokens;
  };
  bool any_row = false;
  while (reader.next(line)) {
    const auto tokens = tokens_of(line);
    if (tokens.empty() || tokens[0][0] == '#') continue;
    if (columns.empty()) {
      for (auto token : tokens) {
        if (token.size() != 1) reader.fail(fmt::format("header: '{}' is not a single residue letter", token));
        const int code = encode_residue(token[0]);
        if (code < 0) reader.fail(fmt::format("header: '{}' is not in the alphabet {}", token, kAlphabet));
        if (column_seen[code]) reader.fail(fmt::format("header: letter '{}' appears twice", token));
        column_seen[code] = true;
        columns.push_back(code);
      }
      continue;
    }
    if (tokens[0].size() != 1)
      reader.fail(fmt::format("row label '{}' is not a single residue letter", tokens[0]));
    const int row = encode_residue(tokens[0][0]);
    if (row < 0) reader.fail(fmt::format("row label '{}' is not in the alphabet {}", tokens[0], kAlphabet));
    if (row_seen[row]) reader.fail(fmt::format("row '{}' appears twice", tokens[0]));
    if (tokens.size() != columns.size() + 1)
      reader.fail(fmt::format("row '{}' has {} scores, the header has {} letters", tokens[0],
                              tokens.size() - 1, columns.size()));
    for (std::size_t c = 0; c < columns.size(); ++c) {
      int value = 0;
      const auto token = tokens[c + 1];
      const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
      if (ec != std::errc() || ptr != token.data() + token.size())
        reader.fail(fmt::format("score '{}' is not an integer", token));
      if (value < -kMaxAbsScore || value > kMaxAbsScore)
        reader.fail(fmt::format("score {} is outside [-{}, {}]", value, kMaxAbsScore, kMaxAbsScore));
      matrix.scores[row * kMatrixStride + columns[c]] = value;
    }
    row_seen[row] = true;
    any_row = true;
  }
  if (columns.empty() || !any_row)
    reader.fail("no matrix found (expected a header row of letters and one row per letter)");
  // The 20 standard residues must be present; the others default to X's scores (U, O in NCBI's
  // files), or to the matrix minimum when the file has no X.
  for (int code = 0; code < 20; ++code)
    if (!row_seen[code] || !column_seen[code])
      reader.fail(fmt::format("residue '{}' is missing (rows and columns need the 20 amino acids)",
                              decode_residue(static_cast<std::uint8_t>(code))));
  int minimum = std::numeric_limits<int>::max();
  for (int a = 0; a < kAlphabetSize; ++a)
    for (int b = 0; b < kAlphabetSize; ++b)
      if (row_seen[a] && column_seen[b]) minimum = std::min(minimum, matrix.at(a, b));
  const int x = encode_residue('X');
  const bool have_x = row_seen[x] && column_seen[x];
  auto fallback = [&](int) { return have_x ? x : -1; };
  for (int a = 0; a < kAlphabetSize; ++a)
    for (int b = 0; b < kAlphabetSize; ++b) {
      if (row_seen[a] && column_seen[b]) continue;
      const int fa = row_seen[a] ? a : fallback(a);
      const int fb = column_seen[b] ? b : fallback(b);
      matrix.scores[a * kMatrixStride + b] =
          (fa >= 0 && fb >= 0 && row_seen[fa] && column_seen[fb]) ? matrix.at(fa, fb) : minimum;
    }
  return matrix;
}

ScoringMatrix read_matrix(const std::filesystem::path& path) {
  auto matrix = parse_matrix(path.string(), io::read_all(path));
  matrix.name = path.filename().string();
  return matrix;
}

std::vector<std::string> builtin_matrix_names() {
  std::vector<std::string> names;
  for (const auto& m : detail::builtin_matrix_table()) names.emplace_back(m.name);
  return names;
}

ScoringMatrix builtin_matrix(std::string_view name) {
  const auto wanted = upper(name);
  for (const auto& m : detail::builtin_matrix_table()) {
    if (m.name == wanted) {
      static_assert(kAlphabetSize <= kMatrixStride);
      auto matrix = parse_matrix(m.name, m.ncbi_text);
      matrix.name = std::string(m.name);
      matrix.builtin = true;
      return matrix;
    }
  }
  throw InputError("--matrix", 0,
                   fmt::format("unknown matrix '{}' (built-in: {}; or give a file in NCBI format)", name,
                               fmt::join(builtin_matrix_names(), ", ")));
}

ScoringMatrix matrix_by_name_or_file(const std::string& name_or_path) {
  const auto wanted = upper(name_or_path);
  for (const auto& m : detail::builtin_matrix_table())
    if (m.name == wanted) return builtin_matrix(wanted);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(name_or_path, ec)) return builtin_matrix(name_or_path);  // throws
  return read_matrix(name_or_path);
}

void Scoring::validate() const {
  if (gap_open < 1 || gap_open > 1000)
    throw InputError("--gap-open", 0, fmt::format("{} is outside [1, 1000]", gap_open));
  if (gap_extend < 1 || gap_extend > gap_open)
    throw InputError("--gap-extend", 0,
                     fmt::format("{} is outside [1, gap-open = {}]", gap_extend, gap_open));
}

std::optional<KarlinAltschul> published_gapped_parameters(std::string_view matrix_name, int gap_open,
                                                          int gap_extend) {
  const auto wanted = upper(matrix_name);
  // Our gap of length k costs open + (k-1)*extend = (open - extend) + k*extend in BLAST's terms.
  const int blast_existence = gap_open - gap_extend;
  for (const auto& m : detail::builtin_matrix_table()) {
    if (m.name != wanted) continue;
    for (const auto& row : m.gapped_parameters)
      if (row.blast_gap_existence == blast_existence && row.blast_gap_extension == gap_extend)
        return KarlinAltschul{row.lambda, row.K, row.H, row.alpha, row.beta};
  }
  return std::nullopt;
}

double bit_score(const KarlinAltschul& ka, int raw_score) {
  return (ka.lambda * raw_score - std::log(ka.K)) / std::log(2.0);
}

namespace {
// BLAST's effective search space: the expected HSP length ell is the fixed point of
// ell = (alpha/lambda) * ln(K (m - ell)(n - N ell)) + beta. The right side falls as ell grows, so
// the fixed point is found by bisection on [0, ell_max], where ell_max keeps K (m - ell)(n - N ell)
// >= max(m, n); both lengths are then shortened by floor(ell).
double length_adjustment(const KarlinAltschul& ka, double m, double n, double sequences) {
  if (ka.alpha <= 0 || sequences < 1) return 0;
  const double alpha_over_lambda = ka.alpha / ka.lambda;
  const double c = m * n - std::max(m, n) / ka.K;
  if (c <= 0) return 0;
  const double b = m * sequences + n;
  const double ell_max = 2 * c / (b + std::sqrt(std::max(0.0, b * b - 4 * sequences * c)));
  auto excess = [&](double ell) {
    return alpha_over_lambda * (std::log(ka.K) + std::log((m - ell) * (n - sequences * ell))) + ka.beta - ell;
  };
  if (excess(0) <= 0) return 0;
  if (excess(ell_max) >= 0) return std::floor(ell_max);
  double lo = 0, hi = ell_max;
  for (int iteration = 0; iteration < 60; ++iteration) {
    const double mid = 0.5 * (lo + hi);
    (excess(mid) > 0 ? lo : hi) = mid;
  }
  return std::floor(lo);
}
}  // namespace

double e_value(const KarlinAltschul& ka, int raw_score, std::uint64_t m, std::uint64_t n,
               std::uint64_t sequences) {
  const double ell = length_adjustment(ka, double(m), double(n), double(sequences));
  const double effective_m = std::max(1.0, double(m) - ell);
  const double effective_n = std::max(1.0, double(n) - double(sequences) * ell);
  return ka.K * effective_m * effective_n * std::exp(-ka.lambda * raw_score);
}

}  // namespace molaccel::align
