// `molaccel orbital ...` as a process: cube output, --json, exit codes, no output on bad input.
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "orbital_test_util.hpp"

namespace molaccel::orbital {
namespace {

int run_cli(const std::string& arguments) {
  const std::string command = std::string(MOLACCEL_CLI_PATH) + " " + arguments + " > /dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string quoted(const std::filesystem::path& p) {
  return "'" + p.string() + "'";
}

TEST(OrbitalCli, GridWritesCubesAndJson) {
  molaccel::testing::TempDir dir;
  const auto input = test::bundled("h2o_631gs.molden");
  ASSERT_EQ(run_cli("orbital grid " + quoted(input) +
                    " --device cpu --orbital homo --density total --spacing 0.3 -o " +
                    quoted(dir / "w.cube") + " --json " + quoted(dir / "r.json")),
            0);
  const Cube homo = read_cube(dir / "w.homo.cube");
  const Cube rho = read_cube(dir / "w.density-total.cube");
  EXPECT_EQ(homo.grid.counts, rho.grid.counts);
  const auto report = nlohmann::json::parse(molaccel::testing::read_file(dir / "r.json"));
  EXPECT_EQ(report["normalisation_fix"], "none");
  // A coarse 0.3 A grid under-resolves the oxygen 1s cusp (~7% low); the fine-grid integral is
  // tested in test_cpu. Here only that the report carries a sensible number.
  EXPECT_NEAR(report["density_integral"].get<double>(), 10.0, 1.0);
  // The stages (read, start, compute, write) add up to the command's time.
  double sum = 0;
  for (const char* stage : {"read", "start", "compute", "write"}) {
    ASSERT_TRUE(report["stages"].contains(stage)) << stage;
    sum += report["stages"][stage].get<double>();
  }
  EXPECT_NEAR(sum, report["total_seconds"].get<double>(), 1e-6);
}

// --device auto gives a job that the CPU finishes sooner than a GPU would start the CPU alone, and
// says so in the report; an explicit --device is left as it is.
TEST(OrbitalCli, AutoRunsASmallGridOnTheCpu) {
  molaccel::testing::TempDir dir;
  const auto input = test::bundled("h2o_631gs.molden");
  ASSERT_EQ(run_cli("orbital grid " + quoted(input) + " --orbital homo --spacing 0.3 -o " +
                    quoted(dir / "a.cube") + " --json " + quoted(dir / "a.json")),
            0);
  const auto report = nlohmann::json::parse(molaccel::testing::read_file(dir / "a.json"));
  EXPECT_LT(report["cpu_seconds_estimate"].get<double>(), 0.3);
  EXPECT_NE(report["device_choice"].get<std::string>().find("small job"), std::string::npos);
  EXPECT_EQ(report["backend"].get<std::string>().rfind("cpu", 0), 0u);
  ASSERT_EQ(run_cli("orbital grid " + quoted(input) + " --orbital homo --spacing 0.3 --device cpu -o " +
                    quoted(dir / "c.cube") + " --json " + quoted(dir / "c.json")),
            0);
  const auto explicit_cpu = nlohmann::json::parse(molaccel::testing::read_file(dir / "c.json"));
  EXPECT_FALSE(explicit_cpu.contains("device_choice"));
  EXPECT_EQ(molaccel::testing::read_file(dir / "a.cube"), molaccel::testing::read_file(dir / "c.cube"));
}

TEST(OrbitalCli, BadInputFailsAndWritesNothing) {
  molaccel::testing::TempDir dir;
  const std::string text = molaccel::testing::read_file(test::bundled("h2o_631gs.molden"));
  molaccel::testing::write_file(dir / "cut.molden", text.substr(0, text.size() / 2));
  EXPECT_NE(run_cli("orbital grid " + quoted(dir / "cut.molden") + " --device cpu --orbital homo -o " +
                    quoted(dir / "out.cube")),
            0);
  EXPECT_FALSE(std::filesystem::exists(dir / "out.cube"));
  const auto input = test::bundled("h2o_631gs.molden");
  EXPECT_NE(run_cli("orbital grid " + quoted(input) + " --device cpu --orbital lumo+99 -o " +
                    quoted(dir / "out.cube")),
            0);
  EXPECT_NE(run_cli("orbital grid " + quoted(input) + " --device cpu --orbital homo --backend fast -o " +
                    quoted(dir / "out.cube")),
            0);
  EXPECT_FALSE(std::filesystem::exists(dir / "out.cube"));
  EXPECT_EQ(run_cli("orbital info " + quoted(input)), 0);
  EXPECT_NE(run_cli("orbital info " + quoted(dir / "cut.molden")), 0);
}

// Numbers that describe no grid are refused with an error, not turned into a 1 x 1 x 1 grid or a
// NaN cube: a spacing so small that the point count overflows, a NaN origin or screening, a
// --grid-like cube whose axes span no volume.
TEST(OrbitalCli, BadNumbersAreRefused) {
  molaccel::testing::TempDir dir;
  const auto input = test::bundled("h2o_631gs.molden");
  const std::string grid =
      "orbital grid " + quoted(input) + " --device cpu --orbital homo -o " + quoted(dir / "out.cube") + " ";
  EXPECT_EQ(run_cli(grid + "--spacing 1e-20"), 1);
  EXPECT_EQ(run_cli(grid + "--origin nan 0 0 --size 1 1 1"), 1);
  EXPECT_EQ(run_cli(grid + "--origin 0 0 0 --size 1 inf 1"), 1);
  EXPECT_EQ(run_cli(grid + "--screening nan"), 1);
  molaccel::testing::write_file(dir / "flat.cube",
                                "flat\ngrid with a zero axis\n"
                                "    1    0.000000    0.000000    0.000000\n"
                                "    2    0.500000    0.000000    0.000000\n"
                                "    2    0.000000    0.000000    0.000000\n"
                                "    2    0.000000    0.000000    0.500000\n"
                                "    1    0.000000    0.000000    0.000000    0.000000\n"
                                " 1 2 3 4 5 6 7 8\n");
  EXPECT_EQ(run_cli(grid + "--grid-like " + quoted(dir / "flat.cube")), 1);
  EXPECT_FALSE(std::filesystem::exists(dir / "out.cube"));
  EXPECT_THROW(explicit_grid({0, 0, 0}, {1, 1, 1}, 1e-20), InputError);
  EXPECT_THROW(read_cube(dir / "flat.cube"), InputError);
  EXPECT_EQ(run_cli(grid + "--spacing 0.4"), 0);  // the same command with sane numbers works
}

// -q: no summary line on standard output (the cube is still written).
TEST(OrbitalCli, QuietPrintsNothing) {
  molaccel::testing::TempDir dir;
  const std::string command = std::string(MOLACCEL_CLI_PATH) + " -q orbital grid " +
                              quoted(test::bundled("h2o_631gs.molden")) +
                              " --device cpu --orbital homo --spacing 0.4 -o " + quoted(dir / "q.cube") +
                              " > " + quoted(dir / "stdout.txt");
  ASSERT_EQ(std::system(command.c_str()), 0);
  EXPECT_EQ(molaccel::testing::read_file(dir / "stdout.txt"), "");
  EXPECT_TRUE(std::filesystem::exists(dir / "q.cube"));
}

}  // namespace
}  // namespace molaccel::orbital
