// The JIT generator: its source compiles with NVRTC (no GPU needed), folds the basis in, and
// gives atoms with the same basis the same element type.
#include "orbital/jit_source.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/tuning.hpp"
#include "orbital_test_util.hpp"

namespace molaccel::orbital {
namespace {

TEST(OrbitalJitSource, ElementTypesAndConstants) {
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  const auto basis = detail::pack_basis(wfn, 1e-9);
  const auto jit = detail::generate_jit_source(basis, detail::parse_cull_layout("8x8x8/4"));
  EXPECT_EQ(jit.type_count, 2);  // O and H (both H atoms share one type)
  ASSERT_EQ(jit.atom_type.size(), 3u);
  EXPECT_EQ(jit.atom_type[1], jit.atom_type[2]);
  EXPECT_NE(jit.atom_type[0], jit.atom_type[1]);
  EXPECT_NE(jit.source.find("evalp_type_1"), std::string::npos);
  // Primitive loops unrolled into one exponential per primitive of each type: O has 15
  // primitives (s6, s3, p3, s1, p1, d1), H has 4 (s3, s1).
  std::size_t exponentials = 0;
  for (auto at = jit.source.find("* r2[q])"); at != std::string::npos;
       at = jit.source.find("* r2[q])", at + 1))
    ++exponentials;
  EXPECT_EQ(exponentials, 19u);
}

// Atoms sorted by type; the kernel compiles with NVRTC for every shell type (s to g, pure and
// Cartesian) and every brick shape the generator supports; unsupported shapes are rejected.
TEST(OrbitalJitSource, SortsAtomsByTypeAndCompiles) {
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  const auto basis = detail::pack_basis(wfn, 1e-9);
  const auto jit = detail::generate_jit_source(basis, detail::parse_cull_layout("2x8x8"));
  EXPECT_EQ(jit.type_count, 2);
  ASSERT_EQ(jit.type_first.size(), 3u);
  EXPECT_EQ(jit.type_first[0], 0);
  EXPECT_EQ(jit.type_first[2], 3);
  ASSERT_EQ(jit.atom_order.size(), 3u);
  for (std::size_t i = 0; i + 1 < jit.atom_order.size(); ++i)
    EXPECT_LE(jit.atom_type[static_cast<std::size_t>(jit.atom_order[i])],
              jit.atom_type[static_cast<std::size_t>(jit.atom_order[i + 1])]);
  EXPECT_EQ(detail::parse_cull_layout("4x8x8/2").points_per_thread, 2);
  EXPECT_EQ(detail::parse_cull_layout("4x8x8/2").name(), "4x8x8/2");
  EXPECT_EQ(detail::parse_cull_layout("1x16x8").name(), "1x16x8");
  for (const char* bad : {"2x8x4", "3x8x8", "4x8x8/3", "1x8x16x", "2x8", "abc", "1x32x4"})
    EXPECT_THROW(detail::parse_cull_layout(bad), Error) << bad;
  MOLACCEL_REQUIRE_NVRTC();
  const auto n2 = read_molden(test::bundled("n2_ccpvtz.molden"));  // d and f shells, pure
  const auto random = test::random_wavefunction(5, 5, 1);          // s to g, several types
  const auto random3 = test::random_wavefunction(3, 4, 1), random8 = test::random_wavefunction(8, 4, 1);
  for (const Wavefunction* w : {&wfn, &n2, &random, &random3, &random8}) {
    for (const char* shape : {"2x8x8", "1x16x8", "4x4x8", "4x8x8/2", "8x8x8/4"}) {
      const auto src =
          detail::generate_jit_source(detail::pack_basis(*w, 1e-9), detail::parse_cull_layout(shape));
      JitRequest request;
      request.source = src.source;
      request.program_name = "orbital_jit_culled_test.cu";
      request.kernel_names = {src.kernel_name};
      request.arch = "sm_90";
      EXPECT_FALSE(default_jit_cache().compile(request).cubin.empty()) << shape;
    }
  }
}

// The GPU tuning: the defaults the library runs, and the benchmarks' --tuning settings.
TEST(OrbitalTuning, DefaultsAndSettings) {
  const detail::Tuning one = detail::tuning_for(0, {1, false});
  EXPECT_FALSE(one.basis_matrix);
  EXPECT_EQ(one.jit_brick.name(), "8x8x8/4");
  EXPECT_EQ(one.chunks_per_grid, 24u);
  EXPECT_TRUE(detail::tuning_for(0, {5, false}).basis_matrix);
  EXPECT_FALSE(detail::tuning_for(0, {4, false}).basis_matrix);
  EXPECT_TRUE(detail::tuning_for(-1, {1, true}).basis_matrix);
  detail::Tuning t = one;
  detail::set_tuning(t, "jit_brick=4x16x8/4");
  detail::set_tuning(t, "chunks=48");
  detail::set_tuning(t, "drain_threads=8");
  detail::set_tuning(t, "drain_piece_mib=8");
  detail::set_tuning(t, "basis_matrix=1");
  EXPECT_EQ(t.jit_brick.name(), "4x16x8/4");
  EXPECT_EQ(t.chunks_per_grid, 48u);
  EXPECT_EQ(t.drain_threads, 8);
  EXPECT_EQ(t.drain_piece_mib, 8u);
  EXPECT_TRUE(t.basis_matrix);
  for (const char* bad :
       {"chunks=0", "chunks=x", "drain_piece_mib=65", "jit_brick=3x8x8", "layout=row", "chunks"})
    EXPECT_THROW(detail::set_tuning(t, bad), Error) << bad;
}

}  // namespace
}  // namespace molaccel::orbital
