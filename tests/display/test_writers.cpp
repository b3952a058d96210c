// Mesh files read back by check_mesh_files.py, an independent reader written from the glTF 2.0
// and PLY/OBJ specifications with Python's standard library only (header, chunk lengths, buffer
// views and accessor ranges, min/max, index bounds, unit normals, triangle counts).
#include <cstdlib>

#include "display_test_util.hpp"

namespace molaccel::display {
namespace {

Scene sphere_scene() {
  test::Field f;
  test::fill_gaussian(f, {30, 30, 30}, 0.2, {-2.9, -2.9, -2.9}, {0, 0, 0}, 1.0);
  Scene scene;
  scene.parts.push_back({"positive lobe", extract_isosurface(Resources::cpu(2), f.grid, 0.05f, Inside::above),
                         positive_phase_colour()});
  for (auto& part : ball_and_stick({{0, 0, 0}, {0.96, 0, 0}}, {8, 1}, 1.0))
    scene.parts.push_back(std::move(part));
  return scene;
}

std::size_t triangles(const Scene& scene) {
  std::size_t n = 0;
  for (const auto& p : scene.parts) n += p.mesh.triangle_count();
  return n;
}

int check(const std::string& format, const std::filesystem::path& file, std::size_t expected) {
  const std::string command = std::string(MOLACCEL_PYTHON) + " '" + MOLACCEL_MESH_CHECKER + "' " + format +
                              " '" + file.string() + "' " + std::to_string(expected);
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class DisplayWriters : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(MOLACCEL_PYTHON).empty())
      GTEST_SKIP() << "no Python 3 interpreter found at configure time";
  }
};

TEST_F(DisplayWriters, GlbPassesASpecReader) {
  molaccel::testing::TempDir dir;
  const Scene scene = sphere_scene();
  write_scene(dir / "s.glb", scene);
  EXPECT_EQ(check("glb", dir / "s.glb", triangles(scene)), 0);
}

TEST_F(DisplayWriters, PlyAndObjReadBack) {
  molaccel::testing::TempDir dir;
  const Scene scene = sphere_scene();
  write_scene(dir / "s.ply", scene);
  EXPECT_EQ(check("ply", dir / "s.ply", triangles(scene)), 0);
  write_scene(dir / "s.obj", scene);
  EXPECT_TRUE(std::filesystem::exists(dir / "s.mtl"));
  EXPECT_EQ(check("obj", dir / "s.obj", triangles(scene)), 0);
}

TEST(DisplayWriterErrors, EmptySceneAndUnknownFormatWriteNothing) {
  molaccel::testing::TempDir dir;
  Scene empty;
  empty.parts.push_back({"nothing", {}, positive_phase_colour()});
  for (const char* name : {"e.glb", "e.ply", "e.obj"}) {
    EXPECT_THROW(write_scene(dir / name, empty), InputError) << name;
    EXPECT_FALSE(std::filesystem::exists(dir / name)) << name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "e.mtl"));
  EXPECT_THROW(write_scene(dir / "x.stl", sphere_scene()), InputError);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace molaccel::display
