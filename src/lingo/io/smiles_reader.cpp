// Readers for .smi/.smi.gz and CSV molecule files.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "molaccel/lingo.hpp"
#include "runtime/host_resources.hpp"
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

// `parts` appended to `set` in order; the keys, counts and magnitudes are copied on every core.
void append(MoleculeSet& set, std::vector<MoleculeSet>& parts, int threads) {
  std::vector<std::size_t> molecules(parts.size() + 1, set.size()),
      entries(parts.size() + 1, set.counts.size());
  for (std::size_t p = 0; p < parts.size(); ++p) {
    molecules[p + 1] = molecules[p] + parts[p].size();
    entries[p + 1] = entries[p] + parts[p].counts.size();
  }
  set.offsets.resize(molecules.back() + 1);
  if (set.wide_keys())
    molaccel::detail::resize_populated(set.keys64, entries.back());
  else
    molaccel::detail::resize_populated(set.keys32, entries.back());
  molaccel::detail::resize_populated(set.counts, entries.back());
  set.magnitudes.resize(molecules.back());
  set.names.resize(molecules.back());
  parallel_for(parts.size(), threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t p = b; p < e; ++p) {
      MoleculeSet& part = parts[p];
      for (std::size_t i = 1; i < part.offsets.size(); ++i)
        set.offsets[molecules[p] + i] = entries[p] + part.offsets[i];
      std::copy(part.keys32.begin(), part.keys32.end(),
                set.keys32.begin() + static_cast<std::ptrdiff_t>(entries[p]));
      std::copy(part.keys64.begin(), part.keys64.end(),
                set.keys64.begin() + static_cast<std::ptrdiff_t>(entries[p]));
      std::copy(part.counts.begin(), part.counts.end(),
                set.counts.begin() + static_cast<std::ptrdiff_t>(entries[p]));
      std::copy(part.magnitudes.begin(), part.magnitudes.end(),
                set.magnitudes.begin() + static_cast<std::ptrdiff_t>(molecules[p]));
      std::move(part.names.begin(), part.names.end(),
                set.names.begin() + static_cast<std::ptrdiff_t>(molecules[p]));
      part = MoleculeSet();
    }
  });
}

// `threads`: the cores that check, preprocess and count the molecules (1 inside a parallel read).
MoleculeSet read_from(io::LineReader& reader, const LingoOptions& lingo, const ReadOptions& read,
                      ReadStats* stats_out, int threads = 0) {
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
    parallel_for(n_slices, threads, 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t p = b; p < e; ++p) {
        MoleculeSet& part = parts[p];
        part.q = lingo.q;
        part.preprocessing = lingo.preprocessing;
        const std::size_t m0 = p * kSlice, m1 = std::min(pending.size(), (p + 1) * kSlice);
        // At most one entry per character: no reallocation while the slice is counted.
        std::size_t characters = 0;
        for (std::size_t m = m0; m < m1; ++m) characters += pending[m].smiles.size();
        part.offsets.reserve(m1 - m0 + 1);
        part.magnitudes.reserve(m1 - m0);
        part.names.reserve(m1 - m0);
        if (part.wide_keys())
          part.keys64.reserve(characters);
        else
          part.keys32.reserve(characters);
        part.counts.reserve(characters);
        for (std::size_t m = m0; m < m1; ++m) {
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
    }
    append(set, parts, threads);
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

// Text per parsed block: small enough that the last block, parsed after the input has been read,
// adds little (a 256 KiB block of SMILES is about 5,000 molecules).
constexpr std::size_t kBlockBytes = std::size_t{1} << 18;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// A .smi text parsed in blocks of whole lines as they arrive, each block by read_from on one
// thread (every core but the reading one, which joins in at the end); finish() joins the blocks in
// file order: the molecules, names, statistics and error (the first in file order) of one read_from
// of the whole text.
class BlockParser {
 public:
  // `expected_bytes`: the text's size, for the progress bar (an estimate is enough).
  BlockParser(std::string name, const LingoOptions& lingo, const ReadOptions& read,
              std::uint64_t expected_bytes)
      : name_(std::move(name)),
        lingo_(lingo),
        read_(read),
        bar_("read " + std::filesystem::path(name_).filename().string(),
             std::max<std::size_t>(1, static_cast<std::size_t>((expected_bytes + kMiB - 1) / kMiB)), "MiB") {}
  ~BlockParser() { stop(); }
  BlockParser(const BlockParser&) = delete;
  BlockParser& operator=(const BlockParser&) = delete;

  // Block `text`: whole lines, each ending in '\n' (the last one may not), the first one after
  // line `lines_before` of the file.
  void add(std::string text, std::size_t lines_before) {
    {
      std::lock_guard lock(mutex_);
      blocks_.push_back(std::make_unique<Block>());
      blocks_.back()->text = std::move(text);
      blocks_.back()->lines_before = lines_before;
      queue_.push_back(blocks_.back().get());
    }
    // The helpers start with the second block: a text of one block is parsed by finish() alone.
    if (blocks_.size() == 2)
      for (int i = 1; i < cpu_info().logical_cores; ++i) threads_.emplace_back([this] { work(); });
    work_ready_.notify_one();
  }

  // `last_line`: the number of the file's last line.
  MoleculeSet finish(std::size_t last_line, ReadStats* stats_out) {
    for (;;) {  // the reading thread parses what is still queued
      Block* block = nullptr;
      {
        std::lock_guard lock(mutex_);
        if (queue_.empty()) break;
        block = queue_.front();
        queue_.pop_front();
      }
      parse(*block);
    }
    stop();
    bar_.finish();
    for (const auto& block : blocks_)
      if (block->error) std::rethrow_exception(block->error);
    MoleculeSet set;
    set.q = lingo_.q;
    set.preprocessing = lingo_.preprocessing;
    std::vector<MoleculeSet> parts(blocks_.size());
    ReadStats total;
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      parts[i] = std::move(blocks_[i]->part);
      const ReadStats& s = blocks_[i]->stats;
      total.lines += s.lines;
      total.skipped_invalid += s.skipped_invalid;
      if (s.first_skipped_line != 0 &&
          (total.first_skipped_line == 0 || s.first_skipped_line < total.first_skipped_line))
        total.first_skipped_line = s.first_skipped_line;
    }
    blocks_.clear();
    append(set, parts, 0);
    if (set.size() == 0 && !read_.slice)
      throw InputError(
          name_, std::max<std::size_t>(last_line, 1),
          total.skipped_invalid > 0
              ? fmt::format("no molecules: all {} SMILES are invalid (skipped)", total.skipped_invalid)
          : last_line == 0 ? std::string("no molecules: the file is empty")
                           : std::string("no molecules: only blank lines or a header"),
          __FILE__, __LINE__);
    if (set.size() > std::size_t{0xffffffff})
      throw InputError(name_, last_line, "more than 2^32-1 molecules in one file", __FILE__, __LINE__);
    total.molecules = set.size();
    if (stats_out) *stats_out = total;
    return set;
  }

 private:
  struct Block {
    std::string text;
    std::size_t lines_before = 0;
    MoleculeSet part;
    ReadStats stats;
    std::exception_ptr error;
  };

  void parse(Block& block) {
    try {
      ReadOptions read = read_;
      read.slice = true;
      read.lines_before = block.lines_before;
      io::LineReader reader(name_, block.text, block.lines_before);
      block.part = read_from(reader, lingo_, read, &block.stats, 1);
    } catch (...) {
      block.error = std::current_exception();
    }
    const std::uint64_t parsed = parsed_bytes_.fetch_add(block.text.size()) + block.text.size();
    std::string().swap(block.text);
    bar_.set(static_cast<std::size_t>(parsed / kMiB));
  }
  void work() {
    for (;;) {
      Block* block = nullptr;
      {
        std::unique_lock lock(mutex_);
        work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping
        block = queue_.front();
        queue_.pop_front();
      }
      parse(*block);
    }
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_ready_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  std::string name_;
  LingoOptions lingo_;
  ReadOptions read_;
  ProgressBar bar_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::deque<Block*> queue_;
  bool stopping_ = false;
  std::atomic<std::uint64_t> parsed_bytes_{0};
  std::vector<std::thread> threads_;
};

// The text of `reader` in blocks of whole lines to `parser`, then the parsed set.
MoleculeSet parse_in_blocks(io::LineReader& reader, BlockParser& parser, ReadStats* stats) {
  std::string block;
  std::size_t block_first = reader.line_number();
  while (reader.next_lines(block, kBlockBytes)) {
    parser.add(std::move(block), block_first);
    block = std::string();
    block_first = reader.line_number();
  }
  return parser.finish(reader.line_number(), stats);
}

}  // namespace

MoleculeSet read_molecules(const std::filesystem::path& path, const LingoOptions& lingo,
                           const ReadOptions& read, ReadStats* stats) {
  io::LineReader reader(path);
  if (!read.smiles_column.empty()) return read_from(reader, lingo, read, stats);  // CSV: in order
  if (lingo.q < kMinQ || lingo.q > kMaxQ)
    throw InputError("--q", 0, fmt::format("q must be between {} and {}, got {}", kMinQ, kMaxQ, lingo.q));
  // Lines are read (and decompressed) here, in blocks that the other cores parse meanwhile.
  BlockParser parser(reader.name(), lingo, read, path == "-" ? 1 : io::text_size_estimate(path));
  return parse_in_blocks(reader, parser, stats);
}

MoleculeSet parse_molecules(std::string_view name, std::string_view content, const LingoOptions& lingo,
                            const ReadOptions& read, ReadStats* stats) {
  if (read.smiles_column.empty() && lingo.q >= kMinQ && lingo.q <= kMaxQ) {
    BlockParser parser(std::string(name), lingo, read, content.size());
    io::LineReader reader(name, content, read.slice ? read.lines_before : 0);
    return parse_in_blocks(reader, parser, stats);
  }
  io::LineReader reader(name, content, read.slice ? read.lines_before : 0);
  return read_from(reader, lingo, read, stats);
}

}  // namespace molaccel::lingo
