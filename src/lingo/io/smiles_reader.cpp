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

  auto reject = [&](const std::string& message) {
    if (!read.skip_invalid) reader.fail(message);
    ++stats.skipped_invalid;
    if (stats.first_skipped_line == 0) stats.first_skipped_line = reader.line_number();
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
    if (auto problem = smiles_problem(smiles); !problem.empty()) {
      reject(problem);
      continue;
    }
    set.add(name.empty() ? std::to_string(reader.line_number()) : tsv_safe_name(name),
            preprocess(smiles, lingo.preprocessing));
  }
  if (csv && !have_header) reader.fail("empty CSV file: no header line");
  // An empty input is a mistake (a wrong path, a failed export), never an empty result. Reported
  // at the last line (line 1 of an empty file) so that the message reads FILE:LINE: message.
  if (set.size() == 0)
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
  io::LineReader reader(name, content);
  return read_from(reader, lingo, read, stats);
}

}  // namespace molaccel::lingo
