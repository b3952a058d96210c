// Tier 1: the reference on spheres (analytic area and volume) and lobe pairs: closed, consistently
// wound, outward unit normals. Tier 2: the threaded CPU path against the reference (the same
// triangles exactly, vertices to float rounding) on random fields, odd sizes, skewed and
// left-handed grids.
#include <numbers>

#include "display/backends.hpp"
#include "display/cell_tables.hpp"
#include "display_test_util.hpp"

namespace molaccel::display {
namespace {

using test::Field;

const Resources& cpu2() {
  static const Resources r = Resources::cpu(2);
  return r;
}

TEST(DisplayTables, EveryCaseIsConsistent) {
  const auto& t = detail::cell_tables();
  EXPECT_EQ(t.count[0], 0);
  EXPECT_EQ(t.count[255], 0);
  for (int c = 1; c < 255; ++c) {
    // Complementary cases cross the same edges with opposite winding.
    ASSERT_EQ(t.count[c], t.count[255 - c]) << c;
    EXPECT_GT(t.count[c], 0) << c;
    for (int e = 0; e < 3 * t.count[c]; ++e) {
      const int code = t.edges[c][e], corner = code >> 3, step = code & 7;
      ASSERT_GE(step, 1);
      ASSERT_LE(corner + step, 7);  // the far end is a corner of the cell
      ASSERT_EQ(corner & step, 0);  // the step moves forward from the corner
      EXPECT_NE((c >> corner & 1), (c >> (corner | step) & 1)) << "case " << c << " uncrossed edge";
    }
  }
}

// A Gaussian s function: its level set exp(-alpha r^2) = level is a sphere of radius
// sqrt(-ln(level) / alpha). Piecewise-linear interpolation on a 0.1 grid at R = 1.73 has relative
// area/volume errors of O((h/R)^2) ~ 0.3%; the issue asks for 1%.
TEST(DisplayReference, SphereOfAnSFunctionMatchesAnalyticAreaAndVolume) {
  Field f;
  test::fill_gaussian(f, {61, 63, 59}, 0.1, {-3.0, -3.1, -2.9}, {0.013, -0.021, 0.007}, 1.0);
  const float level = 0.05f;
  const double radius = std::sqrt(-std::log(static_cast<double>(level)) / 1.0);
  const Mesh mesh = reference::extract_isosurface(f.grid, level, Inside::above);
  ASSERT_FALSE(mesh.empty());
  EXPECT_EQ(test::closed_surface_problem(mesh), "");
  EXPECT_LT(test::max_normal_length_error(mesh), 1e-6);
  const double area = 4 * std::numbers::pi * radius * radius;
  const double volume = 4.0 / 3.0 * std::numbers::pi * radius * radius * radius;
  EXPECT_NEAR(mesh_area(mesh) / area, 1.0, 0.01);
  EXPECT_NEAR(mesh_volume(mesh) / volume, 1.0, 0.01);  // positive: outward winding
  // Normals point away from the centre (the gradient of exp(-r^2) points inwards).
  for (std::size_t v = 0; v < mesh.vertex_count(); ++v) {
    const float* p = &mesh.positions[3 * v];
    const float* n = &mesh.normals[3 * v];
    const double d[3] = {p[0] - 0.013, p[1] + 0.021, p[2] - 0.007};
    const double r = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    // Linear interpolation of a convex profile along an edge of length L (at most the body diagonal,
    // 0.173) errs by up to L^2/8 * |f''/f'| = 0.00375 * 2.9 = 0.011 radially (outwards).
    EXPECT_NEAR(r, radius, 0.012) << v;
    EXPECT_GT((d[0] * n[0] + d[1] * n[1] + d[2] * n[2]) / r, 0.999) << v;
  }
  // The fast path: same triangles, same measures.
  const Mesh fast = extract_isosurface(cpu2(), f.grid, level, Inside::above, SurfaceBackend::cpu);
  EXPECT_EQ(canonical_triangles(fast), canonical_triangles(mesh));
  EXPECT_EQ(test::closed_surface_problem(fast), "");
  EXPECT_NEAR(mesh_volume(fast) / volume, 1.0, 0.01);
}

// The same sphere sampled on a skewed and on a left-handed grid (axes as given, values from the
// points' positions): still closed, wound outwards (positive volume near the analytic one) and with
// normals pointing away from the centre, on the reference and the fast path alike.
TEST(DisplayReference, SkewedAndLeftHandedGridsStayOutward) {
  const double h = 0.1;
  const std::array<std::array<std::array<double, 3>, 3>, 2> frames{{
      {{{h, 0.02, 0}, {0.015, h, 0}, {0.01, 0.02, h}}},  // skewed
      {{{0, h, 0}, {h, 0, 0}, {0, 0, h}}},               // left-handed (i along y, j along x)
  }};
  const double radius = std::sqrt(-std::log(0.05));
  for (const auto& axes : frames) {
    Field f;
    f.grid.origin = {-3.2, -3.2, -3.2};
    f.grid.axes = axes;
    f.grid.counts = {66, 66, 66};
    f.values.resize(66 * 66 * 66);
    for (std::size_t i = 0; i < 66; ++i)
      for (std::size_t j = 0; j < 66; ++j)
        for (std::size_t k = 0; k < 66; ++k) {
          double r2 = 0;
          for (int x = 0; x < 3; ++x) {
            const double p = f.grid.origin[x] + i * axes[0][x] + j * axes[1][x] + k * axes[2][x];
            r2 += p * p;
          }
          f.values[(i * 66 + j) * 66 + k] = static_cast<float>(std::exp(-r2));
        }
    f.grid.values = f.values.data();
    for (SurfaceBackend backend : {SurfaceBackend::reference, SurfaceBackend::cpu}) {
      const Mesh mesh = extract_isosurface(cpu2(), f.grid, 0.05f, Inside::above, backend);
      EXPECT_EQ(test::closed_surface_problem(mesh), "");
      EXPECT_NEAR(mesh_volume(mesh) / (4.0 / 3.0 * std::numbers::pi * radius * radius * radius), 1.0, 0.01);
      for (std::size_t v = 0; v < mesh.vertex_count(); ++v) {
        const float* p = &mesh.positions[3 * v];
        const float* n = &mesh.normals[3 * v];
        ASSERT_GT((p[0] * n[0] + p[1] * n[1] + p[2] * n[2]) / radius, 0.99) << v;
      }
    }
  }
}

// A p-like function x exp(-r^2): the +iso surface is the x > 0 lobe, the -iso surface the x < 0
// lobe (inside = below -iso); both closed and outward, mirror images of each other.
TEST(DisplayReference, PhaseLobesAreClosedAndOutward) {
  Field f;
  test::fill_gaussian(f, {50, 41, 41}, 0.12, {-3.0, -2.4, -2.4}, {0.0, 0.0, 0.0}, 1.0, /*p_lobe=*/true);
  for (Inside side : {Inside::above, Inside::below}) {
    const float level = side == Inside::above ? 0.05f : -0.05f;
    const Mesh ref = reference::extract_isosurface(f.grid, level, side);
    ASSERT_FALSE(ref.empty());
    EXPECT_EQ(test::closed_surface_problem(ref), "");
    EXPECT_GT(mesh_volume(ref), 0);
    double mean_x = 0;
    for (std::size_t v = 0; v < ref.vertex_count(); ++v) mean_x += ref.positions[3 * v];
    mean_x /= static_cast<double>(ref.vertex_count());
    EXPECT_GT(side == Inside::above ? mean_x : -mean_x, 0.5);
    const Mesh fast = extract_isosurface(cpu2(), f.grid, level, side, SurfaceBackend::cpu);
    EXPECT_EQ(canonical_triangles(fast), canonical_triangles(ref));
    EXPECT_EQ(test::closed_surface_problem(fast), "");
    EXPECT_LT(test::max_normal_length_error(fast), 1e-6);
  }
}

// Vertices: the fast path interpolates in float, the reference in double; positions agree to a few
// float ulps of the grid extent, normals to float rounding of the differences (1e-4 leaves room
// for cancellation in the central differences of nearly flat random fields).
void expect_same_mesh(const Mesh& fast, const Mesh& ref, double extent) {
  ASSERT_EQ(canonical_triangles(fast), canonical_triangles(ref));
  ASSERT_EQ(fast.edge_ids, ref.edge_ids);  // both number vertices in edge-id order
  for (std::size_t i = 0; i < ref.positions.size(); ++i) {
    ASSERT_NEAR(fast.positions[i], ref.positions[i], 4e-6 * extent) << i;
    ASSERT_NEAR(fast.normals[i], ref.normals[i], 1e-4) << i;
  }
}

TEST(DisplayCpu, MatchesReferenceOnRandomFields) {
  const std::array<std::array<double, 3>, 3> orthogonal{{{0.3, 0, 0}, {0, 0.25, 0}, {0, 0, 0.2}}};
  const std::array<std::array<double, 3>, 3> skewed{{{0.3, 0.05, 0}, {0.04, 0.25, 0}, {0.02, 0.03, 0.2}}};
  const std::array<std::array<double, 3>, 3> left_handed{{{0, 0.25, 0}, {0.3, 0, 0}, {0, 0, 0.2}}};
  std::uint32_t seed = 7;
  for (const auto& axes : {orthogonal, skewed, left_handed})
    for (std::array<std::size_t, 3> counts :
         {std::array<std::size_t, 3>{2, 2, 2}, {13, 17, 11}, {5, 3, 33}, {21, 2, 9}}) {
      Field f;
      test::fill_random(f, counts, ++seed, axes);
      for (Inside side : {Inside::above, Inside::below})
        for (float level : {0.0f, 0.3f, -0.45f}) {
          const Mesh ref = reference::extract_isosurface(f.grid, level, side);
          const Mesh fast = extract_isosurface(cpu2(), f.grid, level, side, SurfaceBackend::cpu);
          SCOPED_TRACE(::testing::Message() << "seed " << seed << " counts " << counts[0] << "x" << counts[1]
                                            << "x" << counts[2] << " level " << level);
          expect_same_mesh(fast, ref, 10.0);
          // One thread and two give the same arrays (plane order, not thread timing, decides).
          const Mesh single = extract_isosurface(Resources::cpu(1), f.grid, level, side, SurfaceBackend::cpu);
          EXPECT_EQ(single.indices, fast.indices);
          EXPECT_EQ(single.positions, fast.positions);
        }
    }
}

// Random values inside a box whose faces are all outside: many small closed blobs, and every one
// of them closed, outward and with unit normals.
TEST(DisplayCpu, RandomBlobIsClosed) {
  Field f;
  test::fill_random(f, {24, 25, 26}, 99, {{{0.1, 0, 0}, {0, 0.1, 0}, {0, 0, 0.1}}});
  for (std::size_t i = 0; i < 24; ++i)
    for (std::size_t j = 0; j < 25; ++j)
      for (std::size_t k = 0; k < 26; ++k)
        if (i == 0 || j == 0 || k == 0 || i == 23 || j == 24 || k == 25)
          f.values[(i * 25 + j) * 26 + k] = -1.0f;
  const Mesh fast = extract_isosurface(cpu2(), f.grid, 0.0f, Inside::above, SurfaceBackend::cpu);
  ASSERT_FALSE(fast.empty());
  EXPECT_EQ(test::closed_surface_problem(fast), "");
  EXPECT_LT(test::max_normal_length_error(fast), 1e-6);
  EXPECT_GT(mesh_volume(fast), 0);
}

TEST(DisplayIsosurface, NoCrossingGivesAnEmptyMeshAndBadGridsAreErrors) {
  Field f;
  test::fill_gaussian(f, {10, 10, 10}, 0.2, {-1, -1, -1}, {0, 0, 0}, 1.0);
  EXPECT_TRUE(extract_isosurface(cpu2(), f.grid, 2.0f, Inside::above, SurfaceBackend::cpu).empty());
  EXPECT_TRUE(reference::extract_isosurface(f.grid, 2.0f, Inside::above).empty());
  ScalarGrid flat = f.grid;
  flat.counts = {1, 10, 100};
  EXPECT_THROW(extract_isosurface(cpu2(), flat, 0.5f, Inside::above), InputError);
  ScalarGrid degenerate = f.grid;
  degenerate.axes[2] = degenerate.axes[0];
  EXPECT_THROW(extract_isosurface(cpu2(), degenerate, 0.5f, Inside::above), InputError);
  EXPECT_THROW(extract_isosurface(cpu2(), f.grid, std::nanf(""), Inside::above), InputError);
  EXPECT_EQ(parse_surface_backend("gpu"), SurfaceBackend::cuda);
  EXPECT_THROW(parse_surface_backend("opengl"), InputError);
}

TEST(DisplayIsosurface, BallAndStickShapesAreClosedAndOutward) {
  // Water-like: O at the origin, two H at 0.96 A; one sphere per atom, two bonds.
  const auto parts = ball_and_stick({{0, 0, 0}, {0.96, 0, 0}, {-0.24, 0.93, 0}}, {8, 1, 1}, 1.0);
  ASSERT_EQ(parts.size(), 3u);  // O atoms, H atoms, bonds
  for (const ScenePart& part : parts) {
    EXPECT_LT(test::max_normal_length_error(part.mesh), 1e-6) << part.name;
    if (part.name == "bonds") {
      EXPECT_EQ(part.mesh.triangle_count(), 2u * 2u * 16u);
    } else {
      EXPECT_GT(mesh_volume(part.mesh), 0) << part.name;  // outward winding
    }
  }
}

}  // namespace
}  // namespace molaccel::display
