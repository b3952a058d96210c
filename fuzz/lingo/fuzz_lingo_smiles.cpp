// libFuzzer target for the LINGO readers (.smi and CSV) and everything a parsed line feeds:
// validation, preprocessing, Lingo extraction, and one similarity through the reference.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "molaccel/lingo.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace molaccel::lingo;
  if (size == 0) return 0;
  // First byte picks the options; the rest is the file content.
  const std::uint8_t mode = data[0];
  const std::string_view content(reinterpret_cast<const char*>(data + 1), size - 1);
  LingoOptions lingo;
  lingo.q = 1 + (mode & 7);
  lingo.preprocessing.digits = (mode & 8) ? DigitMode::all : DigitMode::paper;
  lingo.preprocessing.halogens = (mode & 16) != 0;
  ReadOptions read;
  read.skip_invalid = (mode & 32) != 0;
  if (mode & 64) read.smiles_column = (mode & 128) ? "1" : "smiles";
  try {
    const auto set = parse_molecules("fuzz", content, lingo, read);
    if (set.size() >= 2) {
      for (auto metric : {Metric::tanimoto, Metric::vidal, Metric::set}) {
        const float s = similarity(set, 0, set, set.size() - 1, metric);
        if (!(s >= 0.0f && s <= 1.0f)) __builtin_trap();
      }
    }
  } catch (const molaccel::InputError&) {
    // Bad input is expected to be rejected this way; anything else is a bug.
  }
  return 0;
}
