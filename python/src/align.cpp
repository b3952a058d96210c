// molaccel._core.align: sequences, databases and Smith-Waterman search over the public API of
// include/molaccel/align.hpp, as `molaccel align search|makedb` call it. Hits come back as
// columns (the TSV's), which the Python side assembles into a structured array.
#include <cmath>
#include <cstdint>
#include <utility>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"
#include "molaccel/align.hpp"

namespace molaccel::python {
namespace {

namespace al = molaccel::align;

nb::dict search(const al::SequenceSet& queries, const al::Database& db, int k, const std::string& matrix,
                int gap_open, int gap_extend, bool traceback, bool evalues, const std::string& backend,
                const std::string& device, int threads, bool progress) {
  if (k < 1) throw InputError("k", 0, "must be at least 1");
  al::SearchOptions options;
  options.scoring.matrix = al::matrix_by_name_or_file(matrix);
  options.scoring.gap_open = gap_open;
  options.scoring.gap_extend = gap_extend;
  options.scoring.validate();
  options.top_k = k;
  options.traceback = traceback;
  options.evalues = evalues;
  options.backend = parse_compute_backend(backend);
  const Resources resources = resources_for(device, threads, progress);
  al::SearchResult result;
  double seconds = 0;
  {
    nb::gil_scoped_release release;
    const double started = now_seconds();
    result = al::search(resources, queries, db, options);
    seconds = now_seconds() - started;
  }
  std::size_t n = 0;
  for (const auto& list : result.hits) n += list.size();
  std::vector<std::uint32_t> query_index, subject_index, qstart, qend, sstart, send, alnlen;
  std::vector<std::int32_t> score;
  std::vector<double> bitscore, evalue, identity;
  std::vector<std::string> query_id, subject_id;
  for (auto* v : {&query_index, &subject_index, &qstart, &qend, &sstart, &send, &alnlen}) v->reserve(n);
  for (auto* v : {&bitscore, &evalue, &identity}) v->reserve(n);
  score.reserve(n);
  query_id.reserve(n);
  subject_id.reserve(n);
  for (const auto& list : result.hits)
    for (const auto& hit : list) {
      const auto& a = hit.alignment;
      query_index.push_back(hit.query);
      subject_index.push_back(hit.subject);
      query_id.push_back(queries.ids[hit.query]);
      subject_id.push_back(db.id_of_original(hit.subject));
      score.push_back(hit.score);
      bitscore.push_back(hit.bitscore);
      evalue.push_back(hit.evalue);
      qstart.push_back(a.query_start);
      qend.push_back(a.query_end);
      sstart.push_back(a.subject_start);
      send.push_back(a.subject_end);
      identity.push_back(a.length > 0 ? 100.0 * a.identities / a.length : std::nan(""));
      alnlen.push_back(a.length);
    }
  nb::dict d;
  d["query"] = std::move(query_id);
  d["subject"] = std::move(subject_id);
  d["score"] = to_numpy(std::move(score), {n});
  d["bitscore"] = to_numpy(std::move(bitscore), {n});
  d["evalue"] = to_numpy(std::move(evalue), {n});
  d["qstart"] = to_numpy(std::move(qstart), {n});
  d["qend"] = to_numpy(std::move(qend), {n});
  d["sstart"] = to_numpy(std::move(sstart), {n});
  d["send"] = to_numpy(std::move(send), {n});
  d["identity"] = to_numpy(std::move(identity), {n});
  d["alnlen"] = to_numpy(std::move(alnlen), {n});
  d["query_index"] = to_numpy(std::move(query_index), {n});
  d["subject_index"] = to_numpy(std::move(subject_index), {n});
  nb::dict info;  // the CLI's --json fields
  info["kernel"] = result.stats.kernel;
  info["cells"] = result.stats.cells;
  info["rescored_pairs"] = result.stats.rescored;
  info["scoring_seconds"] = result.stats.seconds;
  info["seconds"] = seconds;  // the whole library call: scoring, statistics, traceback
  d["info"] = info;
  return d;
}

}  // namespace

void bind_align(nb::module_& m) {
  nb::class_<al::SequenceSet>(m, "SequenceSet")
      .def("__len__", &al::SequenceSet::size)
      .def_prop_ro("ids", [](const al::SequenceSet& s) { return s.ids; })
      .def("sequence", [](const al::SequenceSet& s, std::size_t i) {
        if (i >= s.size()) throw nb::index_error("sequence index out of range");
        std::string letters;
        for (auto code : s.sequence(i)) letters += al::decode_residue(code);
        return letters;
      });
  m.def("read_fasta", [](const std::string& path) {
    nb::gil_scoped_release release;
    return al::read_fasta(path);
  });
  m.def("encode", [](const std::vector<std::pair<std::string, std::string>>& id_and_letters) {
    nb::gil_scoped_release release;
    return al::encode_sequences(id_and_letters);
  });

  nb::class_<al::Database>(m, "Database")
      .def_static("from_fasta",
                  [](const std::string& path) {
                    nb::gil_scoped_release release;
                    return al::Database::from_fasta(path);
                  })
      .def_static("from_sequences",
                  [](const al::SequenceSet& sequences) {
                    nb::gil_scoped_release release;
                    return al::Database::from_sequences(sequences);
                  })
      .def_static("open",
                  [](const std::string& dbdir) {
                    nb::gil_scoped_release release;
                    return al::Database::open(dbdir);
                  })
      .def_static("load",
                  [](const std::string& path) {
                    nb::gil_scoped_release release;
                    return al::Database::load(path);
                  })
      .def("write",
           [](const al::Database& db, const std::string& dbdir) {
             nb::gil_scoped_release release;
             db.write(dbdir);
           })
      .def("__len__", &al::Database::size)
      .def_prop_ro("residues", &al::Database::residues)
      .def_prop_ro("max_length", &al::Database::max_length)
      .def_prop_ro("ids", [](const al::Database& db) {
        std::vector<std::string> ids(db.size());
        for (std::size_t i = 0; i < db.size(); ++i) ids[i] = db.id_of_original(static_cast<std::uint32_t>(i));
        return ids;
      });
  m.def("search", &search);
  m.def("matrix_names", &al::builtin_matrix_names);
}

}  // namespace molaccel::python
