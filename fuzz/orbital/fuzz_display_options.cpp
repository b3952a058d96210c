// libFuzzer target for the display commands' option parsers: --orbital selections (`all`,
// `homo-5:lumo+5`, names, numbers), --view (`rx=..,ry=..,rz=..,zoom=..`) and --size (`WxH`). The
// first byte picks the parser; any text either parses or throws molaccel::InputError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "molaccel/display.hpp"
#include "molaccel/orbital.hpp"

namespace {
// Water, minimal basis: 7 orbitals, 5 occupied (enough for homo/lumo arithmetic and ranges).
constexpr std::string_view kMolden = R"([Molden Format]
[Atoms] AU
O 1 8 0.0 0.0 0.0
H 2 1 0.0 1.43 1.1
H 3 1 0.0 -1.43 1.1
[GTO]
1 0
s 1 1.0
 5.0 1.0
s 1 1.0
 1.0 1.0
p 1 1.0
 1.0 1.0

2 0
s 1 1.0
 1.0 1.0

3 0
s 1 1.0
 1.0 1.0

[MO]
)";

const molaccel::orbital::Wavefunction& water() {
  static const molaccel::orbital::Wavefunction wfn = [] {
    std::string text(kMolden);
    for (int i = 0; i < 7; ++i) {
      text += " Ene= " + std::to_string(-1.0 + 0.3 * i) +
              "\n Spin= Alpha\n Occup= " + (i < 5 ? "2.0" : "0.0") + "\n";
      for (int c = 1; c <= 7; ++c)
        text += " " + std::to_string(c) + " " + (c == i + 1 ? "1.0" : "0.0") + "\n";
    }
    molaccel::orbital::ReadOptions options;
    options.check_normalisation = false;
    return molaccel::orbital::read_molden_text("water.molden", text, options);
  }();
  return wfn;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0:
        (void)molaccel::orbital::parse_orbital_selection(text, water());
        break;
      case 1:
        (void)molaccel::display::parse_view(text);
        break;
      default:
        (void)molaccel::display::parse_image_size(text);
        break;
    }
  } catch (const molaccel::InputError&) {
  }
  return 0;
}
