// The commands' GPU path as processes (`--device gpu`: grid, surfaces and image on the GPU): the
// same files and pictures as the CPU path within the renderers' tolerance, meshes read by the
// independent reader, one file per orbital, frames in order, no file on bad input. Skipped without
// a GPU.

#include <nlohmann/json.hpp>

#include "display_test_util.hpp"
#include "testing/processes.hpp"

namespace molaccel::display {
namespace {

using molaccel::testing::quoted;
int run(const std::string& command) {
  return molaccel::testing::exit_code(command);
}

std::filesystem::path water() {
  return molaccel::testing::source_dir() / "data/orbital/h2o_631gs.molden";
}

std::string command(const std::string& what, const std::string& device, const std::string& arguments) {
  return std::string(MOLACCEL_CLI_PATH) + " orbital " + what + " " + quoted(water()) + " --device " + device +
         " --spacing 0.2 " + arguments;
}

// The picture the CPU path draws, within the PNG checker's mean tolerance (3/255 per channel: the
// grids of the two paths differ by float rounding, which moves silhouettes by a sample here and
// there; a wrong colour, framing or orbital moves it by tens).
// A density is one surface colour (--density), an orbital both phases.
int same_picture(const std::filesystem::path& gpu, const std::filesystem::path& cpu, int w, int h,
                 bool density = false) {
  return run(std::string(MOLACCEL_PYTHON) + " " + quoted(MOLACCEL_PNG_CHECKER) + " " + quoted(gpu) + " " +
             std::to_string(w) + " " + std::to_string(h) + (density ? " --density" : "") + " --reference " +
             quoted(cpu) + " --tolerance 3");
}

TEST(DisplayGpuCli, RenderMatchesTheCpuPathAndTheReference) {
  MOLACCEL_REQUIRE_GPU();
  if (std::string(MOLACCEL_PYTHON).empty()) GTEST_SKIP() << "no Python 3 interpreter found at configure time";
  molaccel::testing::TempDir dir;
  ASSERT_EQ(run(command("render", "gpu",
                        "--orbital homo --size 160x120 --view rx=-30,ry=25 -o " + quoted(dir / "gpu.png") +
                            " --json " + quoted(dir / "r.json"))),
            0);
  const auto report = nlohmann::json::parse(molaccel::testing::read_file(dir / "r.json"));
  EXPECT_EQ(report["render_backend"], "cuda");
  EXPECT_EQ(report["surface_backend"], "cuda");
  ASSERT_EQ(run(command("render", "cpu",
                        "--orbital homo --size 160x120 --view rx=-30,ry=25 -o " + quoted(dir / "cpu.png"))),
            0);
  EXPECT_EQ(same_picture(dir / "gpu.png", dir / "cpu.png", 160, 120), 0);
  EXPECT_EQ(
      same_picture(dir / "gpu.png",
                   molaccel::testing::source_dir() / "tests/display/data/water_homo_160x120.png", 160, 120),
      0);
  // A range: one file each, every field on the GPU.
  ASSERT_EQ(run(command("render", "gpu", "--orbital homo-1:homo --size 64x48 -o " + quoted(dir / "w.png"))),
            0);
  EXPECT_TRUE(std::filesystem::exists(dir / "w.4.png"));
  EXPECT_TRUE(std::filesystem::exists(dir / "w.5.png"));
}

TEST(DisplayGpuCli, SurfacesPassTheReaderAndBadInputWritesNothing) {
  MOLACCEL_REQUIRE_GPU();
  if (std::string(MOLACCEL_PYTHON).empty()) GTEST_SKIP() << "no Python 3 interpreter found at configure time";
  molaccel::testing::TempDir dir;
  ASSERT_EQ(
      run(command("surface", "gpu",
                  "--orbital homo:lumo -o " + quoted(dir / "w.glb") + " --json " + quoted(dir / "r.json"))),
      0);
  const auto report = nlohmann::json::parse(molaccel::testing::read_file(dir / "r.json"));
  ASSERT_EQ(report["outputs"].size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_GT(report["surfaces"][i]["positive_triangles"].get<std::size_t>(), 100u);
    EXPECT_EQ(run(std::string(MOLACCEL_PYTHON) + " " + quoted(MOLACCEL_MESH_CHECKER) + " glb " +
                  quoted(std::filesystem::path(report["outputs"][i].get<std::string>())) + " " +
                  std::to_string(report["output_triangles"][i].get<std::size_t>())),
              0);
  }
  molaccel::testing::TempDir empty;
  EXPECT_EQ(run(command("surface", "gpu", "--orbital homo:lumo --iso 0.5 -o " + quoted(empty / "x.glb"))), 1);
  EXPECT_EQ(run(command("render", "gpu", "--orbital homo --iso 2 -o " + quoted(empty / "x.png"))), 1);
  EXPECT_TRUE(std::filesystem::is_empty(empty.path()));
}

// A density takes the device path too (the engine's weighted-density kernel into device memory)
// and draws the CPU path's picture.
TEST(DisplayGpuCli, DensityOnTheDevicePath) {
  MOLACCEL_REQUIRE_GPU();
  if (std::string(MOLACCEL_PYTHON).empty()) GTEST_SKIP() << "no Python 3 interpreter found at configure time";
  molaccel::testing::TempDir dir;
  ASSERT_EQ(run(command("render", "gpu",
                        "--density total --size 96x72 -o " + quoted(dir / "gpu.png") + " --json " +
                            quoted(dir / "r.json"))),
            0);
  const auto report = nlohmann::json::parse(molaccel::testing::read_file(dir / "r.json"));
  EXPECT_EQ(report["on_device"], true);
  EXPECT_EQ(report["surface_backend"], "cuda");
  EXPECT_EQ(report["surfaces"][0]["negative_triangles"], 0);
  ASSERT_EQ(run(command("render", "cpu", "--density total --size 96x72 -o " + quoted(dir / "cpu.png"))), 0);
  EXPECT_EQ(same_picture(dir / "gpu.png", dir / "cpu.png", 96, 72, true), 0);
}

// Frames spread over the GPUs come out in order: three frames (the same molecule; frame 2 is
// frame 1 again) drawn on the GPU match the CPU path's frames.
TEST(DisplayGpuCli, AnimationFramesInOrder) {
  MOLACCEL_REQUIRE_GPU();
  if (std::string(MOLACCEL_PYTHON).empty()) GTEST_SKIP() << "no Python 3 interpreter found at configure time";
  molaccel::testing::TempDir dir;
  const std::string frames = quoted(water()) + " " + quoted(water()) + " " + quoted(water());
  for (const char* device : {"gpu", "cpu"})
    ASSERT_EQ(run(std::string(MOLACCEL_CLI_PATH) + " orbital animate " + frames + " --as-listed --device " +
                  device + " --spacing 0.2 --size 96x72 --orbital homo -o " + quoted(dir / device)),
              0);
  for (const char* frame : {"frame_0001.png", "frame_0002.png", "frame_0003.png"})
    EXPECT_EQ(same_picture(dir / "gpu" / frame, dir / "cpu" / frame, 96, 72), 0) << frame;
}

}  // namespace
}  // namespace molaccel::display
