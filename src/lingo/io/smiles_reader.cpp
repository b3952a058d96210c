// Readers for .smi/.smi.gz and CSV molecule files.
#include <algorithm>
#include <charconv>

#include "molaccel/lingo.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::lingo {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Splits one CSV record (RFC 4180 quoting within a line: "a,b" and "" for a quote).
// Returns false on an unterminated quote.
bool split_csv(std::string_view line, char delimiter, std::vector<std::string>& fields) {
  fields.clear();
  std::string field;
  bool quoted = false, after_quote = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
          after_quote = true;
        }
      } else {
        field += c;
      }
    } else if (c == delimiter) {
      fields.push_back(std::string(after_quote ? std::string_view(field) : trim(field)));
      field.clear();
      after_quote = false;
    } else if (c == '"' && trim(field).empty()) {
      field.clear();
      quoted = true;
    } else {
      field += c;
    }
  }
  if (quoted) return false;
  fields.push_back(std::string(after_quote ? std::string_view(field) : trim(field)));
  return true;
}

bool all_control_free(std::string_view line, std::size_t& column, unsigned char& byte) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if ((c < 0x20 && c != '\t' && c != '\r' && c != '\v' && c != '\f') || c == 0x7f) {
      column = i + 1;
      byte = c;
      return false;
    }
  }
  return true;
}

// Names go into TSV outputs (search hits, neighbours, clusters, matrices): a tab, vertical tab,
// form feed or carriage return inside a name (allowed in a SMILES title or a quoted CSV field)
// becomes a space, so that a name is always one TSV field (docs/lingo.md).
std::string tsv_safe_name(std::string_view name) {
  std::string out(name);
  for (char& c : out)
    if (is_space(c)) c = ' ';
  return out;
}

// Molecules waiting for their SMILES check, preprocessing and Lingo counting, which run on every core
// a batch at a time (the line reading stays serial, in file order).
struct PendingMolecule {
  std::size_t line = 0;
  std::string smiles, name;  // name empty: the line number
};

// `part` appended to `set`.
void append(MoleculeSet& set, MoleculeSet&& part) {
  const std::uint64_t base = set.offsets.back();
  for (std::size_t i = 1; i < part.offsets.size(); ++i) set.offsets.push_back(base + part.offsets[i]);
  set.keys32.insert(set.keys32.end(), part.keys32.begin(), part.keys32.end());
  set.keys64.insert(set.keys64.end(), part.keys64.begin(), part.keys64.end());
  set.counts.insert(set.counts.end(), part.counts.begin(), part.counts.end());
  set.magnitudes.insert(set.magnitudes.end(), part.magnitudes.begin(), part.magnitudes.end());
  set.names.insert(set.names.end(), std::make_move_iterator(part.names.begin()),
                   std::make_move_iterator(part.names.end()));
}

MoleculeSet read_from(io::LineReader& reader, const LingoOptions& lingo, const ReadOptions& read,
                      ReadStats* stats_out) {
  if (lingo.q < kMinQ || lingo.q > kMaxQ)
    throw InputError("--q", 0, fmt::format("q must be between {} and {}, got {}", kMinQ, kMaxQ, lingo.q));
  MoleculeSet set;
  set.q = lingo.q;
  set.preprocessing = lingo.preprocessing;
  ReadStats stats;
  const bool csv = !read.smiles_column.empty();
  std::size_t smiles_index = 0, name_index = 0;
  bool have_header = false;
  std::vector<std::string> fields;

  // The batch: checked, preprocessed and counted in slices on every core, appended in order. The
  // first invalid SMILES in file order stops the run (or is counted with --skip-invalid).
  constexpr std::size_t kBatch = 1 << 16, kSlice = 1024;
  std::vector<PendingMolecule> pending;
  auto flush = [&] {
    const std::size_t n_slices = (pending.size() + kSlice - 1) / kSlice;
    std::vector<MoleculeSet> parts(n_slices);
    std::vector<std::pair<std::size_t, std::string>> problems(n_slices);  // each slice's first
    std::vector<std::size_t> skipped(n_slices, 0);
    parallel_for(n_slices, 0, 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t p = b; p < e; ++p) {
        MoleculeSet& part = parts[p];
        part.q = lingo.q;
        part.preprocessing = lingo.preprocessing;
        part.offsets.reserve(kSlice + 1);
        for (std::size_t m = p * kSlice; m < std::min(pending.size(), (p + 1) * kSlice); ++m) {
          auto& molecule = pending[m];
          if (auto problem = smiles_problem(molecule.smiles); !problem.empty()) {
            if (skipped[p]++ == 0) problems[p] = {molecule.line, std::move(problem)};
            if (!read.skip_invalid) break;
            continue;
          }
          part.add(molecule.name.empty() ? std::to_string(molecule.line) : std::move(molecule.name),
                   preprocess(molecule.smiles, lingo.preprocessing));
        }
      }
    });
    for (std::size_t p = 0; p < n_slices; ++p) {
      if (skipped[p] > 0) {
        if (!read.skip_invalid)
          throw InputError(reader.name(), problems[p].first, problems[p].second, __FILE__, __LINE__);
        stats.skipped_invalid += skipped[p];
        if (stats.first_skipped_line == 0 || problems[p].first < stats.first_skipped_line)
          stats.first_skipped_line = problems[p].first;
      }
      append(set, std::move(parts[p]));
    }
    pending.clear();
  };
  auto reject = [&](const std::string& message) {
    if (!read.skip_invalid) {
      flush();  // an invalid SMILES on an earlier line is the one to report
      reader.fail(message);
    }
    ++stats.skipped_invalid;
    if (stats.first_skipped_line == 0 || reader.line_number() < stats.first_skipped_line)
      stats.first_skipped_line = reader.line_number();
  };

  std::string_view line;
  while (reader.next(line)) {
    ++stats.lines;
    if (trim(line).empty()) continue;
    std::size_t column = 0;
    unsigned char byte = 0;
    if (!all_control_free(line, column, byte)) {
      reject(fmt::format("control byte 0x{:02x} at column {}", byte, column));
      continue;
    }
    std::string_view smiles, name;
    if (csv) {
      if (!split_csv(line, read.csv_delimiter, fields)) {
        if (!have_header) reader.fail("unterminated quote in the CSV header");
        reject("unterminated quote");
        continue;
      }
      if (!have_header) {
        have_header = true;
        std::size_t index = 0;
        const auto& wanted = read.smiles_column;
        auto [ptr, ec] = std::from_chars(wanted.data(), wanted.data() + wanted.size(), index);
        if (ec == std::errc() && ptr == wanted.data() + wanted.size()) {
          if (index == 0 || index > fields.size())
            reader.fail(
                fmt::format("--smiles-column {} is outside the header's {} columns", index, fields.size()));
          smiles_index = index - 1;
        } else {
          auto it = std::find(fields.begin(), fields.end(), wanted);
          if (it == fields.end()) reader.fail(fmt::format("no column named '{}' in the CSV header", wanted));
          smiles_index = static_cast<std::size_t>(it - fields.begin());
        }
        // The name comes from the first other column called name/id, else the line number.
        name_index = fields.size();
        for (std::size_t i = 0; i < fields.size(); ++i) {
          std::string lower;
          for (char c : fields[i]) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          if (i != smiles_index && (lower == "name" || lower == "id" || lower == "title")) {
            name_index = i;
            break;
          }
        }
        continue;
      }
      if (smiles_index >= fields.size()) {
        reject(fmt::format("record has {} fields, the SMILES column is {}", fields.size(), smiles_index + 1));
        continue;
      }
      smiles = trim(fields[smiles_index]);
      if (name_index < fields.size()) name = trim(fields[name_index]);
    } else {
      std::string_view rest = trim(line);
      std::size_t end = 0;
      while (end < rest.size() && !is_space(rest[end])) ++end;
      smiles = rest.substr(0, end);
      name = trim(rest.substr(end));
    }
    pending.push_back({reader.line_number(), std::string(smiles), name.empty() ? "" : tsv_safe_name(name)});
    if (pending.size() == kBatch) flush();
  }
  flush();
  if (csv && !have_header) reader.fail("empty CSV file: no header line");
  // An empty input is a mistake (a wrong path, a failed export), never an empty result. Reported
  // at the last line (line 1 of an empty file) so that the message reads FILE:LINE: message.
  if (set.size() == 0 && !read.slice)
    throw InputError(
        reader.name(), std::max<std::size_t>(reader.line_number(), 1),
        stats.skipped_invalid > 0
            ? fmt::format("no molecules: all {} SMILES are invalid (skipped)", stats.skipped_invalid)
            : std::string(reader.line_number() == 0 ? "no molecules: the file is empty"
                                                    : "no molecules: only blank lines or a header"),
        __FILE__, __LINE__);
  stats.molecules = set.size();
  if (set.size() > std::size_t{0xffffffff}) reader.fail("more than 2^32-1 molecules in one file");
  if (stats_out) *stats_out = stats;
  return set;
}

}  // namespace

MoleculeSet read_molecules(const std::filesystem::path& path, const LingoOptions& lingo,
                           const ReadOptions& read, ReadStats* stats) {
  io::LineReader reader(path);
  return read_from(reader, lingo, read, stats);
}

MoleculeSet parse_molecules(std::string_view name, std::string_view content, const LingoOptions& lingo,
                            const ReadOptions& read, ReadStats* stats) {
  io::LineReader reader(name, content, read.slice ? read.lines_before : 0);
  return read_from(reader, lingo, read, stats);
}

}  // namespace molaccel::lingo
