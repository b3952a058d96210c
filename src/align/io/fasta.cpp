// FASTA reader: plain or gzip, ids = first word after '>', residues encoded on the fly.
#include <algorithm>
#include <cctype>

#include "molaccel/align.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::align {

void SequenceSet::add(std::string id, std::span<const std::uint8_t> codes) {
  ids.push_back(std::move(id));
  residues.insert(residues.end(), codes.begin(), codes.end());
  offsets.push_back(residues.size());
}

namespace {

// `bar` (where given) counts MiB of text, moved every 4,096 lines.
SequenceSet parse(io::LineReader& reader, ProgressBar* bar = nullptr) {
  constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
  SequenceSet set;
  std::string_view line;
  std::uint64_t bytes = 0, lines = 0;
  bool in_record = false;
  std::size_t record_line = 0;
  auto close_record = [&]() {
    if (!in_record) return;
    if (set.offsets.back() == set.residues.size())
      throw InputError(reader.name(), record_line,
                       fmt::format("record '{}' has no residues", set.ids.back()));
    set.offsets.push_back(set.residues.size());
  };
  while (reader.next(line)) {
    bytes += line.size() + 1;
    if (bar && (++lines & 4095) == 0) bar->set(static_cast<std::size_t>(bytes / kMiB));
    if (!line.empty() && line[0] == '>') {
      close_record();
      std::size_t begin = 1;
      while (begin < line.size() && std::isspace(static_cast<unsigned char>(line[begin]))) ++begin;
      std::size_t end = begin;
      while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end]))) ++end;
      if (end == begin) reader.fail("record header '>' has no id");
      set.ids.emplace_back(line.substr(begin, end - begin));
      in_record = true;
      record_line = reader.line_number();
      continue;
    }
    std::size_t column = 0;
    for (char c : line) {
      ++column;
      if (std::isspace(static_cast<unsigned char>(c))) continue;
      if (!in_record) reader.fail("sequence data before the first '>' header");
      const int code = encode_residue(c);
      if (code < 0) {
        const auto position = set.residues.size() - set.offsets.back() + 1;
        const bool printable = std::isprint(static_cast<unsigned char>(c));
        reader.fail(fmt::format(
            "record '{}', residue {} (column {}): {} is not an amino-acid letter (allowed: {}, any case)",
            set.ids.back(), position, column,
            printable ? fmt::format("'{}'", c) : fmt::format("byte 0x{:02x}", static_cast<unsigned char>(c)),
            kAlphabet));
      }
      set.residues.push_back(static_cast<std::uint8_t>(code));
    }
  }
  close_record();
  if (set.ids.empty()) throw InputError(reader.name(), 0, "no FASTA records found");
  return set;
}

}  // namespace

SequenceSet read_fasta(const std::filesystem::path& path) {
  io::LineReader reader(path);
  // A bar on a terminal for a read of more than half a second (a database as FASTA).
  const std::uint64_t mib = std::max<std::uint64_t>(1, (io::text_size_estimate(path) + (1 << 20) - 1) >> 20);
  ProgressBar bar("read " + path.filename().string(), static_cast<std::size_t>(mib), "MiB");
  SequenceSet set = parse(reader, &bar);
  bar.set(static_cast<std::size_t>(mib));
  return set;
}

SequenceSet parse_fasta(std::string_view source_name, std::string_view text) {
  io::LineReader reader(source_name, text);
  return parse(reader);
}

SequenceSet encode_sequences(const std::vector<std::pair<std::string, std::string>>& id_and_letters) {
  SequenceSet set;
  std::vector<std::uint8_t> codes;
  for (const auto& [id, letters] : id_and_letters) {
    codes.clear();
    for (std::size_t i = 0; i < letters.size(); ++i) {
      const int code = encode_residue(letters[i]);
      if (code < 0)
        throw InputError(
            "<memory>", 0,
            fmt::format("record '{}', residue {}: '{}' is not an amino-acid letter", id, i + 1, letters[i]));
      codes.push_back(static_cast<std::uint8_t>(code));
    }
    set.add(id, codes);
  }
  return set;
}

}  // namespace molaccel::align
