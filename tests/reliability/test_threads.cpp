// Issue 24, faults end to end: the C++ API called from 16 threads at once, each with its own request
// (lingo top-k, align search, orbital grids on the CPU), gives what the same requests give one
// after another, exactly.
#include <thread>

#include "molaccel/align.hpp"
#include "molaccel/lingo.hpp"
#include "molaccel/orbital.hpp"
#include "testing/testing.hpp"

namespace molaccel {
namespace {

namespace lg = molaccel::lingo;
namespace al = molaccel::align;
namespace orb = molaccel::orbital;

TEST(FaultsEndToEnd, SixteenThreadsOfDifferentRequestsGiveTheSerialResults) {
  const auto data = testing::data_dir();
  const lg::MoleculeSet molecules = lg::read_molecules(data / "lingo" / "demo4096.smi", {});
  const lg::MoleculeSet queries = lg::subset(molecules, {0, 5, 17, 99, 1000});
  const al::SequenceSet proteins = al::read_fasta(data / "align" / "demo_queries.fasta");
  const al::Database database =
      al::Database::from_sequences(al::read_fasta(data / "align" / "demo_db.fasta"));
  const orb::Wavefunction water = orb::read_wavefunction(data / "orbital" / "h2o_631gs.molden");
  const orb::GridSpec grid = orb::automatic_grid(water, 2.0, 0.4);

  // Request r: a lingo search with k = 1 + r (r % 3 == 0), an align search of one query with
  // top_k = 1 + r % 4 (r % 3 == 1), the orbital of index r % 5 (r % 3 == 2). Results as text-free
  // vectors compared exactly.
  auto run = [&](int r) -> std::vector<double> {
    const Resources cpu = Resources::cpu(1);
    std::vector<double> out;
    if (r % 3 == 0) {
      lg::ComputeOptions options;
      options.backend = lg::Backend::cpu;
      for (const lg::Hit& h : lg::search(cpu, queries, molecules, std::size_t(1 + r), options)) {
        out.push_back(h.query);
        out.push_back(h.target);
        out.push_back(h.similarity);
      }
    } else if (r % 3 == 1) {
      al::SearchOptions options;
      options.top_k = 1 + r % 4;
      options.backend = al::Backend::cpu;
      al::SequenceSet one;
      const std::size_t q = std::size_t(r) % proteins.size();
      one.add(proteins.ids[q], proteins.sequence(q));
      for (const auto& hits : al::search(cpu, one, database, options).hits)
        for (const al::Hit& h : hits) {
          out.push_back(h.subject);
          out.push_back(h.score);
          out.push_back(h.alignment.query_start);
          out.push_back(h.alignment.subject_end);
        }
    } else {
      orb::EvaluateOptions options;
      options.backend = orb::Backend::cpu;
      const std::vector<orb::OrbitalRef> refs{{orb::Spin::alpha, std::size_t(r % 5)}};
      for (float v : orb::evaluate_orbitals(cpu, water, grid, refs, options)) out.push_back(v);
    }
    return out;
  };
  constexpr int kRequests = 16;
  std::vector<std::vector<double>> serial(kRequests), parallel(kRequests);
  for (int r = 0; r < kRequests; ++r) serial[r] = run(r);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kRequests);
  for (int r = 0; r < kRequests; ++r)
    threads.emplace_back([&, r] {
      try {
        parallel[r] = run(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRequests; ++r) {
    EXPECT_EQ(errors[r], "") << "request " << r;
    EXPECT_FALSE(serial[r].empty()) << "request " << r;
    EXPECT_EQ(parallel[r], serial[r]) << "request " << r;
  }
}

}  // namespace
}  // namespace molaccel
