#include "linalg/program/program_barriers.hpp"

#include "linalg/codegen/codegen.hpp"

namespace molaccel::linalg::program {

// The segment's reductions staged together, one __syncthreads; in a block that is the barrier
// and the staged sums are the totals; on a grid the block sums go to the partials, the grid
// barrier, the totals gathered into shared memory, a __syncthreads; in a cluster the block sums
// are pushed into every block's shared memory, the cluster barrier, and every thread adds them.
std::string cuda_barrier(const Segment& seg, int id, std::size_t kmax, const KernelShape& shape,
                         const std::string& half) {
  const std::size_t k = seg.reductions.size();
  if (k == 0)
    return shape.block            ? "    __syncthreads();\n"
           : shape.cluster_blocks ? "    mp_cluster_barrier();\n"
                                  : "    molaccel_grid_barrier(counter);\n";
  std::string out = fmt::format("    double* part{} = mp_part + (epoch & 1) * {};\n", id, 32 * kmax);
  for (std::size_t r = 0; r < k; ++r)
    out += fmt::format("    mp_stage(acc{}, part{}, {});\n", seg.reductions[r], id, r);
  out += "    __syncthreads();\n";
  if (shape.block) {
    for (std::size_t r = 0; r < k; ++r)
      out += fmt::format("    const double tot{}_{} = mp_block_total(part{}, {});\n", seg.reductions[r], id,
                         id, r);
    return out;
  }
  if (shape.cluster_blocks) {
    out += fmt::format("    double* pushed{} = mp_pushed + (epoch & 1) * {};\n", id, 16 * kmax);
    out +=
        fmt::format("    mp_push_block_sums(part{0}, {1}, pushed{0});\n    mp_cluster_barrier();\n", id, k);
    for (std::size_t r = 0; r < k; ++r)
      out += fmt::format("    const double tot{}_{} = mp_cluster_total(pushed{}, {});\n", seg.reductions[r],
                         id, id, r);
    return out;
  }
  out += fmt::format("    mp_publish_block_sums(part{}, {}, {});\n", id, k, half);
  out += "    molaccel_grid_barrier(counter);\n";
  out += fmt::format("    mp_gather_totals({}, {}, mp_tot + (epoch & 1) * {});\n    __syncthreads();\n", half,
                     k, kmax);
  for (std::size_t r = 0; r < k; ++r)
    out += fmt::format("    const double tot{}_{} = mp_tot[(epoch & 1) * {} + {}];\n", seg.reductions[r], id,
                       kmax, r);
  return out;
}

// The segment's reductions summed together (mp_block_sums: every value in local memory, sums of
// 16, two work-group barriers for all of them; mp_total adds the 16), the barrier, then every
// work-item adds the work-groups' partials itself, in group order (mp_partials_total: the same
// bits everywhere). Summing them through local memory again, as the first half does, gave wrong
// totals under PoCL for pipelined BiCGStab (five sums at one barrier; NaN or another wrong value
// depending on PoCL's work-group method, right with a printf added) while the same kernel with
// direct sums agrees with the host executor.
std::string opencl_barrier(const Segment& seg, int id, std::size_t kmax, const std::string& half) {
  std::string out;
  const std::size_t k = seg.reductions.size();
  for (std::size_t r = 0; r < k; ++r)
    out += fmt::format("    scratch[{} * 256 + get_local_id(0)] = acc{};\n", r, seg.reductions[r]);
  if (k)
    out += fmt::format("    mp_block_sums(scratch, {}, {});\n    if (get_local_id(0) == 0) {{\n", k, kmax);
  for (std::size_t r = 0; r < k; ++r)
    out += fmt::format("      ({})[{}L * get_num_groups(0) + get_group_id(0)] = mp_total(scratch, {}, {});\n",
                       half, seg.reductions[r], r, kmax);
  if (k) out += "    }\n";
  out += "    mp_grid_barrier(counter);\n";
  for (std::size_t r = 0; r < k; ++r)
    out += fmt::format("    const double tot{}_{} = mp_partials_total({} + {}L * get_num_groups(0));\n",
                       seg.reductions[r], id, half, seg.reductions[r]);
  return out;
}

}  // namespace molaccel::linalg::program
