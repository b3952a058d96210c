// `molaccel orbital surface` as a process: meshes that independent readers accept (Python,
// standard library: tests/display/check_mesh_files.py), one file per orbital of a range, and
// bad input (no surface at the isovalue, an unknown format) as an error with no file written.

#include <nlohmann/json.hpp>

#include "molaccel/display.hpp"
#include "orbital_test_util.hpp"
#include "testing/processes.hpp"

namespace molaccel::orbital {
namespace {

using molaccel::testing::quoted;
int run(const std::string& command) {
  return molaccel::testing::exit_code(command);
}

std::string surface(const std::string& arguments) {
  return std::string(MOLACCEL_CLI_PATH) + " orbital surface " + quoted(test::bundled("h2o_631gs.molden")) +
         " --device cpu --spacing 0.2 " + arguments;
}

int check_file(const std::string& format, const std::filesystem::path& file, std::size_t triangles) {
  return run(std::string(MOLACCEL_PYTHON) + " " + quoted(MOLACCEL_MESH_CHECKER) + " " + format + " " +
             quoted(file) + " " + std::to_string(triangles));
}

class OrbitalSurfaceCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(MOLACCEL_PYTHON).empty())
      GTEST_SKIP() << "no Python 3 interpreter found at configure time";
  }
};

TEST_F(OrbitalSurfaceCli, HomoAsGlbPassesTheSpecReader) {
  molaccel::testing::TempDir dir;
  ASSERT_EQ(run(surface("--orbital homo --iso 0.05 -o " + quoted(dir / "homo.glb") + " --json " +
                        quoted(dir / "r.json"))),
            0);
  const auto report = nlohmann::json::parse(molaccel::testing::read_file(dir / "r.json"));
  ASSERT_EQ(report["outputs"].size(), 1u);
  EXPECT_GT(report["surfaces"][0]["positive_triangles"].get<std::size_t>(), 100u);
  EXPECT_GT(report["surfaces"][0]["negative_triangles"].get<std::size_t>(), 100u);
  EXPECT_EQ(check_file("glb", dir / "homo.glb", report["output_triangles"][0].get<std::size_t>()), 0);
}

TEST_F(OrbitalSurfaceCli, RangeWritesOneFileEachAndPlyObjReadBack) {
  molaccel::testing::TempDir dir;
  ASSERT_EQ(
      run(surface("--orbital homo-1:lumo -o " + quoted(dir / "w.ply") + " --json " + quoted(dir / "r.json"))),
      0);
  const auto report = nlohmann::json::parse(molaccel::testing::read_file(dir / "r.json"));
  ASSERT_EQ(report["outputs"].size(), 3u);  // water: HOMO is orbital 5
  for (int i = 0; i < 3; ++i) {
    const auto path = dir / ("w." + std::to_string(4 + i) + ".ply");
    EXPECT_EQ(report["outputs"][i], path.string());
    EXPECT_EQ(check_file("ply", path, report["output_triangles"][i].get<std::size_t>()), 0);
  }
  ASSERT_EQ(run(surface("--density total --no-atoms -o " + quoted(dir / "rho.obj") + " --json " +
                        quoted(dir / "d.json"))),
            0);
  const auto density = nlohmann::json::parse(molaccel::testing::read_file(dir / "d.json"));
  EXPECT_EQ(density["surfaces"][0]["negative_triangles"], 0);
  EXPECT_TRUE(std::filesystem::exists(dir / "rho.mtl"));
  EXPECT_EQ(check_file("obj", dir / "rho.obj", density["output_triangles"][0].get<std::size_t>()), 0);
}

// `all` on water is 18 orbitals, more than one batch: the files of every batch wait in one output
// group, so an isovalue some orbital never reaches still writes nothing.
TEST_F(OrbitalSurfaceCli, AllOrbitalsOneFileEachOrNone) {
  molaccel::testing::TempDir dir;
  ASSERT_EQ(run(surface("--orbital all --no-atoms -o " + quoted(dir / "a.ply") + " --json " +
                        quoted(dir / "r.json"))),
            0);
  const auto report = nlohmann::json::parse(molaccel::testing::read_file(dir / "r.json"));
  ASSERT_EQ(report["outputs"].size(), 18u);
  EXPECT_EQ(report["outputs"][17], (dir / "a.18.ply").string());
  EXPECT_EQ(check_file("ply", dir / "a.18.ply", report["output_triangles"][17].get<std::size_t>()), 0);
  molaccel::testing::TempDir empty;
  EXPECT_EQ(run(surface("--orbital all --iso 0.5 -o " + quoted(empty / "b.glb"))), 1);
  EXPECT_TRUE(std::filesystem::is_empty(empty.path()));
}

TEST_F(OrbitalSurfaceCli, NoSurfaceAndBadFormatAreErrorsWithNothingWritten) {
  molaccel::testing::TempDir dir;
  EXPECT_EQ(run(surface("--orbital homo --iso 5 -o " + quoted(dir / "x.glb"))), 1);
  // The HOMO reaches 0.5 on this grid, the LUMO does not: one failure and no file is written.
  EXPECT_EQ(run(surface("--orbital homo:lumo --iso 0.5 -o " + quoted(dir / "x.glb"))), 1);
  EXPECT_EQ(run(surface("--orbital homo -o " + quoted(dir / "x.stl"))), 1);
  EXPECT_EQ(run(surface("--orbital lumo+99:lumo -o " + quoted(dir / "x.glb"))), 1);
  EXPECT_EQ(run(surface("-o " + quoted(dir / "x.glb"))), 1);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

std::string render(const std::string& arguments) {
  return std::string(MOLACCEL_CLI_PATH) + " orbital render " + quoted(test::bundled("h2o_631gs.molden")) +
         " --device cpu --spacing 0.2 " + arguments;
}

// The image decoded by an independent reader: size, both phase colours, background, and the stored
// reference (made by this renderer; a mean difference of 3/255 per channel leaves room for libm
// and compiler rounding along edges, while a wrong colour, framing or light moves it by tens).
TEST_F(OrbitalSurfaceCli, RenderMatchesTheReferenceImage) {
  molaccel::testing::TempDir dir;
  ASSERT_EQ(run(render("--orbital homo --size 160x120 --view rx=-30,ry=25 -o " + quoted(dir / "homo.png"))),
            0);
  const auto reference = molaccel::testing::source_dir() / "tests/display/data/water_homo_160x120.png";
  EXPECT_EQ(run(std::string(MOLACCEL_PYTHON) + " " + quoted(MOLACCEL_PNG_CHECKER) + " " +
                quoted(dir / "homo.png") + " 160 120 --reference " + quoted(reference) + " --tolerance 3"),
            0);
  ASSERT_EQ(run(render("--orbital homo-1:homo --size 64x48 -o " + quoted(dir / "w.png"))), 0);
  EXPECT_TRUE(std::filesystem::exists(dir / "w.4.png"));
  EXPECT_TRUE(std::filesystem::exists(dir / "w.5.png"));
}

TEST_F(OrbitalSurfaceCli, RenderBadOptionsWriteNothing) {
  molaccel::testing::TempDir dir;
  EXPECT_EQ(run(render("--orbital homo --size 0x10 -o " + quoted(dir / "x.png"))), 1);
  EXPECT_EQ(run(render("--orbital homo --view spin=3 -o " + quoted(dir / "x.png"))), 1);
  EXPECT_EQ(run(render("--orbital homo -o " + quoted(dir / "x.jpg"))), 1);
  EXPECT_EQ(run(render("--orbital homo --iso 2 -o " + quoted(dir / "x.png"))), 1);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(OrbitalSelection, AllRangesAndNames) {
  const Wavefunction wfn = read_wavefunction(test::bundled("h2o_631gs.molden"));
  EXPECT_EQ(parse_orbital_selection("all", wfn).size(), wfn.alpha.count());
  const auto range = parse_orbital_selection("homo-2:lumo+1", wfn);
  ASSERT_EQ(range.size(), 5u);
  EXPECT_EQ(range.front().index, 2u);  // HOMO = orbital 5, index 4
  EXPECT_EQ(range.back().index, 6u);
  EXPECT_EQ(parse_orbital_selection("lumo+1:homo-2", wfn).size(), 5u);  // either order
  EXPECT_EQ(parse_orbital_selection("3:4", wfn).size(), 2u);
  EXPECT_EQ(parse_orbital_selection("alpha:homo", wfn).size(), 1u);
  EXPECT_THROW(parse_orbital_selection("homo:", wfn), InputError);
  EXPECT_THROW(parse_orbital_selection("1:2:3", wfn), InputError);
  EXPECT_THROW(parse_orbital_selection("beta:all", wfn), InputError);  // restricted
}

// Tracking: frame 2 is frame 1 with the HOMO and HOMO-1 swapped in the file and the HOMO's sign
// flipped (what a near-degenerate crossing and an arbitrary phase do): the HOMO of frame 1 is
// found at index 3 of frame 2, with its sign flipped back.
TEST(OrbitalTracking, FollowsAnOrbitalThroughAReorderingAndASignChange) {
  const Wavefunction first = read_wavefunction(test::bundled("h2o_631gs.molden"));
  Wavefunction second = first;
  second.source = "frame2.molden";
  const std::size_t n = static_cast<std::size_t>(first.function_count());
  auto& c = second.alpha.coefficients;
  for (std::size_t k = 0; k < n; ++k) {
    std::swap(c[3 * n + k], c[4 * n + k]);
    c[3 * n + k] = -c[3 * n + k];
  }
  const auto track = track_orbital({first, second}, parse_orbital("homo", first));
  ASSERT_EQ(track.size(), 2u);
  EXPECT_EQ(track[0].ref.index, 4u);
  EXPECT_EQ(track[1].ref.index, 3u);
  EXPECT_TRUE(track[1].sign_flipped);
  EXPECT_NEAR(track[1].overlap, 1.0, 1e-6);  // the same geometry: the mixed overlap is S itself

  Wavefunction other = first;
  other.source = "frame3.molden";
  other.atoms[1].atomic_number = 9;
  try {
    check_same_system({first, second, other});
    FAIL() << "frames with different atoms were accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "frame3.molden");
    EXPECT_NE(std::string(e.what()).find("frame 3"), std::string::npos);
  }
  Wavefunction basis = first;
  basis.source = "frame4.molden";
  basis.shells[2].exponents[0] *= 1.01;
  EXPECT_THROW(check_same_system({first, basis}), InputError);
}

// A rigidly moved copy of water as the second frame (natural order puts f2 before f10); a frame of
// another molecule is an error naming its file, and nothing is written.
TEST_F(OrbitalSurfaceCli, AnimateWritesFramesInNaturalOrderAndRefusesAnotherMolecule) {
  molaccel::testing::TempDir dir;
  const std::string text = molaccel::testing::read_file(test::bundled("h2o_631gs.molden"));
  molaccel::testing::write_file(dir / "f2.molden", text);
  std::string moved = text;
  for (const char* z : {"0.221097956679", "-0.882502100589"}) {
    const std::string from(z);
    const std::string to = from == "0.221097956679" ? "0.421097956679" : "-0.682502100589";
    for (std::size_t at = moved.find(from); at != std::string::npos; at = moved.find(from, at + 1))
      moved.replace(at, from.size(), to);
  }
  molaccel::testing::write_file(dir / "f10.molden", moved);
  const std::string cli =
      std::string(MOLACCEL_CLI_PATH) + " orbital animate --device cpu --spacing 0.2 --size 64x48 ";
  ASSERT_EQ(run(cli + quoted(dir / "f10.molden") + " " + quoted(dir / "f2.molden") + " -o " +
                quoted(dir / "out") + " --json " + quoted(dir / "r.json")),
            0);
  const auto report = nlohmann::json::parse(molaccel::testing::read_file(dir / "r.json"));
  ASSERT_EQ(report["frames"].size(), 2u);
  EXPECT_EQ(report["frames"][0]["file"], (dir / "f2.molden").string());
  EXPECT_EQ(report["frames"][1]["orbital"], 5);
  EXPECT_GT(report["frames"][1]["overlap"].get<double>(), 0.9);
  EXPECT_TRUE(std::filesystem::exists(dir / "out" / "frame_0001.png"));
  EXPECT_TRUE(std::filesystem::exists(dir / "out" / "frame_0002.png"));
  EXPECT_EQ(run(cli + quoted(dir / "f2.molden") + " " + quoted(test::bundled("threonine_631gs.molden")) +
                " -o " + quoted(dir / "bad")),
            1);
  EXPECT_FALSE(std::filesystem::exists(dir / "bad"));
  EXPECT_EQ(run(cli + quoted(dir / "f2.molden") + " -o " + quoted(dir / "movie.avi")), 1);
  EXPECT_FALSE(std::filesystem::exists(dir / "movie.avi"));
  if (display::video_available()) {
    ASSERT_EQ(run(cli + "--fps 4 " + quoted(dir / "f2.molden") + " " + quoted(dir / "f10.molden") + " -o " +
                  quoted(dir / "movie.mp4")),
              0);
    EXPECT_EQ(run(std::string(MOLACCEL_PYTHON) + " " + quoted(MOLACCEL_MP4_CHECKER) + " " +
                  quoted(dir / "movie.mp4") + " 2 64 48"),
              0);
  } else {
    // A build without the FFmpeg libraries: not compiled in (exit 3), nothing written.
    EXPECT_EQ(run(cli + quoted(dir / "f2.molden") + " -o " + quoted(dir / "movie.mp4")), 3);
    EXPECT_FALSE(std::filesystem::exists(dir / "movie.mp4"));
  }
}

}  // namespace
}  // namespace molaccel::orbital
