// Similarity matrices: in memory (similarity_matrix) and to a file (write_similarity_matrix: .npy
// tiles written in place as they arrive, mirrored for self jobs; TSV in row order), the output
// types (fp32, fp16, u8) and the .npy header, which the matrix across ranks also uses.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include <unistd.h>

#include "lingo/tiled_job.hpp"
#include "molaccel/lingo.hpp"
#include "runtime/host_resources.hpp"

namespace molaccel::lingo {

std::string_view to_string(OutputType type) {
  switch (type) {
    case OutputType::fp32:
      return "fp32";
    case OutputType::fp16:
      return "fp16";
    case OutputType::u8:
      return "u8";
  }
  return "?";
}

OutputType parse_output_type(std::string_view text) {
  if (text == "fp32") return OutputType::fp32;
  if (text == "fp16") return OutputType::fp16;
  if (text == "u8") return OutputType::u8;
  throw InputError("--output-type", 0, fmt::format("unknown output type '{}' (fp32, fp16 or u8)", text));
}

std::size_t element_bytes(OutputType type) {
  return type == OutputType::fp32 ? 4 : type == OutputType::fp16 ? 2 : 1;
}

namespace {

using detail::convert_block;
using detail::dense_grid;
using detail::Grid;
using detail::Job;
using detail::Rect;
using detail::round_up;
using detail::RowSink;

// ---- .npy header -------------------------------------------------------------------------------
std::string npy_header(std::size_t rows, std::size_t cols, OutputType type) {
  const char* descr = type == OutputType::fp32 ? "<f4" : type == OutputType::fp16 ? "<f2" : "|u1";
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}, {}), }}", descr, rows, cols);
  std::string header = std::string("\x93NUMPY\x01\x00", 8);
  std::size_t total = header.size() + 2 + dict.size() + 1;
  const std::size_t padded = round_up(total, 64);
  dict.append(padded - total, ' ');
  dict += '\n';
  const auto len = static_cast<std::uint16_t>(dict.size());
  header += static_cast<char>(len & 0xff);
  header += static_cast<char>(len >> 8);
  return header + dict;
}

// Positioned write on the file descriptor: thread-safe, so tiles are written as they arrive.
void write_at(int fd, std::uint64_t offset, const void* data, std::size_t bytes) {
  if (!molaccel::detail::write_all_at(fd, offset, data, bytes))
    throw Error("cannot write the matrix file (disk full?)", __FILE__, __LINE__);
}

}  // namespace

std::vector<std::uint8_t> similarity_bytes(const std::vector<float>& values, OutputType type) {
  return convert_block(values, type);
}
std::string npy_matrix_header(std::size_t rows, std::size_t cols, OutputType type) {
  return npy_header(rows, cols, type);
}

// ---- matrix -------------------------------------------------------------------------------------
std::vector<float> similarity_matrix(const Resources& resources, const MoleculeSet& queries,
                                     const MoleculeSet* db, const ComputeOptions& options, RunInfo* info) {
  std::vector<float> out(queries.size() * (db ? db->size() : queries.size()));
  similarity_matrix(resources, queries, db, out.data(), options, info);
  return out;
}

void similarity_matrix(const Resources& resources, const MoleculeSet& queries, const MoleculeSet* db,
                       float* out, const ComputeOptions& options, RunInfo* info) {
  const double t0 = now_seconds();
  Job job(resources, queries, db, options, false);
  const std::size_t nd = job.db().size();
  const Grid grid = dense_grid(job, options, false, !job.gpu());
  std::size_t pairs = 0;
  std::mutex mutex;
  const JobStats stats = job.run(grid, "lingo matrix", [&](WorkerContext& ctx, const Rect& rect) {
    // Straight into the result (tiles never overlap); the mirror reads what was just written.
    float* corner = out + rect.row_begin * nd + rect.col_begin;
    job.dense(ctx, rect, corner, nd);
    if (grid.upper && rect.col_begin != rect.row_begin)  // mirror into the lower triangle
      for (std::size_t r = 0; r < rect.rows(); ++r)
        for (std::size_t c = 0; c < rect.cols(); ++c)
          out[(rect.col_begin + c) * nd + rect.row_begin + r] = corner[r * nd + c];
    std::lock_guard<std::mutex> lock(mutex);
    pairs += rect.rows() * rect.cols();
  });
  if (info) info->pairs = pairs;
  job.fill_info(info, stats, t0);
}

void write_similarity_matrix(const Resources& resources, const MoleculeSet& queries, const MoleculeSet* db,
                             const std::filesystem::path& path, MatrixFormat format,
                             const ComputeOptions& options, RunInfo* info, OutputType type) {
  if (format == MatrixFormat::tsv && type != OutputType::fp32)
    throw InputError("--output-type", 0, "fp16 and u8 are for .npy output; TSV prints fp32 similarities");
  const double t0 = now_seconds();
  Job job(resources, queries, db, options, false);
  const std::size_t nq = job.queries().size(), nd = job.db().size();
  std::size_t pairs = 0;
  JobStats stats;
  if (format == MatrixFormat::npy) {
    const std::string header = npy_header(nq, nd, type);
    const std::size_t elem = element_bytes(type);
    const Grid grid = dense_grid(job, options, false, !job.gpu());
    write_file_atomically(path, [&](std::FILE* f) {
      if (std::fwrite(header.data(), 1, header.size(), f) != header.size() || std::fflush(f) != 0)
        throw Error("cannot write the matrix file (disk full?)", __FILE__, __LINE__);
      const int fd = fileno(f);
      const std::uint64_t total = header.size() + std::uint64_t{elem} * nq * nd;
      if (nq * nd > 0) write_at(fd, total - 1, "\0", 1);  // size the file up front (sparse)
      auto offset = [&](std::size_t row, std::size_t col) {
        return header.size() + std::uint64_t{elem} * (std::uint64_t{row} * nd + col);
      };
      std::mutex mutex;
      stats = job.run(grid, "lingo matrix", [&](WorkerContext& ctx, const Rect& rect) {
        // Row blocks go to the file as they arrive (from the GPU pipeline's helper threads).
        const RowSink sink = [&](std::size_t row, std::size_t rows, const std::uint8_t* data) {
          const std::size_t row_bytes = elem * rect.cols();
          if (rect.cols() == nd) {
            write_at(fd, offset(rect.row_begin + row, 0), data, rows * row_bytes);
          } else {
            for (std::size_t r = 0; r < rows; ++r)
              write_at(fd, offset(rect.row_begin + row + r, rect.col_begin), data + r * row_bytes, row_bytes);
          }
        };
        if (!grid.upper || rect.col_begin == rect.row_begin) {
          job.dense_stream(ctx, rect, type, sink);
        } else {  // an upper tile off the diagonal: write it and its mirror
          std::vector<float> block(rect.rows() * rect.cols());
          job.dense(ctx, rect, block.data(), rect.cols());
          const auto bytes = convert_block(block, type);
          sink(0, rect.rows(), bytes.data());
          std::vector<std::uint8_t> column(rect.rows() * elem);
          for (std::size_t c = 0; c < rect.cols(); ++c) {
            for (std::size_t r = 0; r < rect.rows(); ++r)
              std::memcpy(column.data() + r * elem, bytes.data() + (r * rect.cols() + c) * elem, elem);
            write_at(fd, offset(rect.col_begin + c, rect.row_begin), column.data(), column.size());
          }
        }
        std::lock_guard<std::mutex> lock(mutex);
        pairs += rect.rows() * rect.cols();
      });
    });
  } else {
    // TSV is written in row order: tiles are row blocks; finished blocks wait for their turn.
    const Grid grid = dense_grid(job, options, true);
    write_file_atomically(path, [&](std::FILE* f) {
      std::fputs("query\ttarget\tsimilarity\n", f);
      std::mutex mutex;
      std::map<std::size_t, std::string> pending;
      std::size_t next = 0;
      stats = job.run(grid, "lingo matrix", [&](WorkerContext& ctx, const Rect& rect) {
        std::vector<float> block(rect.rows() * rect.cols());
        job.dense(ctx, rect, block.data(), rect.cols());
        fmt::memory_buffer text;
        for (std::size_t r = 0; r < rect.rows(); ++r)
          for (std::size_t c = 0; c < rect.cols(); ++c)
            fmt::format_to(std::back_inserter(text), "{}\t{}\t{}\n", job.queries().names[rect.row_begin + r],
                           job.db().names[rect.col_begin + c], block[r * rect.cols() + c]);
        std::lock_guard<std::mutex> lock(mutex);
        pairs += rect.rows() * rect.cols();
        pending.emplace(rect.row_begin, std::string(text.data(), text.size()));
        while (!pending.empty() && pending.begin()->first == next) {
          const std::string& s = pending.begin()->second;
          if (std::fwrite(s.data(), 1, s.size(), f) != s.size())
            throw Error("cannot write the matrix file (disk full?)", __FILE__, __LINE__);
          next = std::min(nq, next + grid.tile_rows);
          pending.erase(pending.begin());
        }
      });
    });
  }
  if (info) info->pairs = pairs;
  job.fill_info(info, stats, t0);
}

}  // namespace molaccel::lingo
