// CPU backend: picks the inter-sequence kernel built for this machine's instruction set, runs
// 8-bit lane groups over threads, then rescores saturated pairs with 16-bit and, if they saturate
// again, exactly with 32-bit lanes.
#include <algorithm>
#include <array>
#include <atomic>
#include <vector>

#include "align/cpu/inter_sequence.hpp"
#include "align/kernels.hpp"

namespace molaccel::align::detail::cpu {
namespace {

struct Variant {
  int (*lanes8)() noexcept;
  int (*lanes16)() noexcept;
  int (*lanes32)() noexcept;
  const char* (*isa_name)() noexcept;
  void (*score_group8)(const molaccel::align::cpu::LaneGroup&);
  void (*score_group16)(const molaccel::align::cpu::LaneGroup&);
  void (*score_group32)(const molaccel::align::cpu::LaneGroup&);
};

const Variant& variant_for_this_cpu() {
  namespace k = molaccel::align::cpu;
  static const Variant variant = [] {
    switch (cpu_info().simd) {
      case SimdLevel::avx512:
        return Variant{k::isa_avx512::lanes8,       k::isa_avx512::lanes16,      k::isa_avx512::lanes32,
                       k::isa_avx512::isa_name,     k::isa_avx512::score_group8, k::isa_avx512::score_group16,
                       k::isa_avx512::score_group32};
      case SimdLevel::avx2:
        return Variant{k::isa_avx2::lanes8,       k::isa_avx2::lanes16,      k::isa_avx2::lanes32,
                       k::isa_avx2::isa_name,     k::isa_avx2::score_group8, k::isa_avx2::score_group16,
                       k::isa_avx2::score_group32};
      default:
        return Variant{k::isa_scalar::lanes8,       k::isa_scalar::lanes16,      k::isa_scalar::lanes32,
                       k::isa_scalar::isa_name,     k::isa_scalar::score_group8, k::isa_scalar::score_group16,
                       k::isa_scalar::score_group32};
    }
  }();
  return variant;
}

}  // namespace

void score_batch(std::span<const std::uint8_t> query, const SubjectBatch& batch, const Scoring& scoring,
                 int threads, int* scores, KernelCounters& counters) {
  const Variant& v = variant_for_this_cpu();
  const bool eight_bit = eight_bit_lanes_apply(scoring);
  counters.kernel = fmt::format("cpu/inter{}/{}", eight_bit ? "8-16" : "16", v.isa_name());
  if (batch.count == 0) return;
  std::array<int, kMatrixStride * kMatrixStride> matrix{};
  std::copy(scoring.matrix.scores.begin(), scoring.matrix.scores.end(), matrix.begin());
  std::vector<std::uint8_t> saturated(batch.count, 0);

  struct Tier {
    int lanes;
    void (*score_group)(const molaccel::align::cpu::LaneGroup&);
    int threshold;  // 0 = exact (32-bit)
  };
  auto run_groups = [&](const std::vector<std::size_t>& subjects, const Tier& tier) {
    const int lanes = tier.lanes;
    const std::size_t groups = (subjects.size() + lanes - 1) / lanes;
    parallel_for(groups, threads, 1, [&](std::size_t begin, std::size_t end) {
      std::vector<const std::uint8_t*> pointers(lanes);
      std::vector<std::uint32_t> lengths(lanes);
      std::vector<int> out(lanes);
      std::vector<std::uint8_t> flags(lanes);
      // H and E columns of the query for this chunk's groups (64-byte aligned for any ISA).
      std::vector<std::uint64_t> workspace(molaccel::align::cpu::workspace_bytes(query.size()) / 8 + 8);
      void* aligned = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(workspace.data()) + 63) &
                                              ~std::uintptr_t{63});
      for (std::size_t g = begin; g < end; ++g) {
        const std::size_t first = g * lanes;
        const int count = static_cast<int>(std::min<std::size_t>(lanes, subjects.size() - first));
        for (int l = 0; l < count; ++l) {
          const auto s = batch.subject(subjects[first + l]);
          pointers[l] = s.data();
          lengths[l] = static_cast<std::uint32_t>(s.size());
        }
        molaccel::align::cpu::LaneGroup group;
        group.query = query.data();
        group.query_length = query.size();
        group.subjects = pointers.data();
        group.lengths = lengths.data();
        group.count = count;
        group.matrix = matrix.data();
        group.gap_open = scoring.gap_open;
        group.gap_extend = scoring.gap_extend;
        group.saturation_threshold = tier.threshold;
        group.scores = out.data();
        group.saturated = tier.threshold ? flags.data() : nullptr;
        group.workspace = aligned;
        tier.score_group(group);
        for (int l = 0; l < count; ++l) {
          scores[subjects[first + l]] = out[l];
          saturated[subjects[first + l]] = tier.threshold ? flags[l] : 0;
        }
      }
    });
  };

  std::vector<Tier> tiers;
  if (eight_bit) tiers.push_back({v.lanes8(), v.score_group8, saturation_threshold8(scoring)});
  tiers.push_back({v.lanes16(), v.score_group16, saturation_threshold16(scoring)});
  tiers.push_back({v.lanes32(), v.score_group32, 0});
  std::vector<std::size_t> subjects(batch.count);
  for (std::size_t i = 0; i < batch.count; ++i) subjects[i] = i;
  for (std::size_t t = 0; t < tiers.size() && !subjects.empty(); ++t) {
    run_groups(subjects, tiers[t]);
    std::vector<std::size_t> again;
    for (auto i : subjects)
      if (saturated[i]) again.push_back(i);
    // Pairs past the 16-bit threshold are the ones the exact tier rescores.
    if (t + 1 == tiers.size() - 1) counters.rescored += again.size();
    subjects = std::move(again);
  }
}

}  // namespace molaccel::align::detail::cpu
