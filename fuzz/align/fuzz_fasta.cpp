// libFuzzer target for the FASTA parser: any input either parses into a consistent set (and, when
// small, aligns without error) or throws InputError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "molaccel/align.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace al = molaccel::align;
  try {
    const auto set = al::parse_fasta("fuzz.fa", std::string_view(reinterpret_cast<const char*>(data), size));
    if (set.offsets.size() != set.size() + 1 || set.offsets.back() != set.residues.size()) __builtin_trap();
    for (auto c : set.residues)
      if (c >= al::kAlphabetSize) __builtin_trap();
    if (set.size() >= 2 && set.residues.size() < 4000) {
      const al::Scoring scoring;
      const auto a = al::align_pair(set.sequence(0), set.sequence(1), scoring);
      if (a.score != al::reference_score(set.sequence(0), set.sequence(1), scoring)) __builtin_trap();
    }
  } catch (const molaccel::InputError&) {
  }
  return 0;
}
