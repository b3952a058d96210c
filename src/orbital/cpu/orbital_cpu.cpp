#include "orbital/cpu/cpu_kernel.hpp"

namespace molaccel::orbital::cpu {

const Variant& select_variant() {
  static const Variant variant = [] {
    switch (cpu_info().simd) {
      case SimdLevel::avx512:
        return Variant{&isa_avx512::evaluate_rows, "cpu/avx512"};
      case SimdLevel::avx2:
        return Variant{&isa_avx2::evaluate_rows, "cpu/avx2"};
      default:
        return Variant{&isa_scalar::evaluate_rows, "cpu/scalar"};
    }
  }();
  return variant;
}

}  // namespace molaccel::orbital::cpu
