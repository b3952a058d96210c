// Element-wise modifier text ("1/(1+X)"): parses into a tree or throws InputError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "molaccel/linalg.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    molaccel::linalg::ElementwiseModifier f("F", text);
    molaccel::linalg::SymbolicVector<double, 0> x;
    molaccel::linalg::SymbolicVector<double, 1> y;
    molaccel::linalg::CustomOperation op(x = f(y));
    (void)op.cuda_source();
  } catch (const molaccel::InputError&) {
  }
  return 0;
}
