// molaccel._core.linalg: the Krylov solvers over the public API of include/molaccel/linalg.hpp,
// as `molaccel linalg solve` calls them, with the matrix given as the three CSR arrays.
#include <cstdint>
#include <span>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "linalg_common.hpp"

namespace molaccel::python {

la::HostCsr<double> to_csr(Array1<std::int32_t> indptr, Array1<std::int32_t> indices, Array1<double> data,
                           std::size_t rows, std::size_t cols) {
  if (indptr.shape(0) != rows + 1)
    throw InputError(
        "A", 0,
        fmt::format("indptr has {} entries; a {}-row matrix needs {}", indptr.shape(0), rows, rows + 1));
  if (indices.shape(0) != data.shape(0))
    throw InputError("A", 0, fmt::format("{} column indices but {} values", indices.shape(0), data.shape(0)));
  la::HostCsr<double> a;
  a.rows = rows;
  a.cols = cols;
  a.row_ptr.assign(indptr.data(), indptr.data() + indptr.shape(0));
  a.col_idx.assign(indices.data(), indices.data() + indices.shape(0));
  a.values.assign(data.data(), data.data() + data.shape(0));
  if (a.row_ptr.front() != 0 || static_cast<std::size_t>(a.row_ptr.back()) != a.values.size())
    throw InputError("A", 0, "indptr must start at 0 and end at the number of stored values");
  for (std::size_t r = 0; r < rows; ++r) {
    if (a.row_ptr[r + 1] < a.row_ptr[r])
      throw InputError("A", 0, fmt::format("indptr decreases at row {}", r));
    for (auto e = a.row_ptr[r]; e < a.row_ptr[r + 1]; ++e) {
      const auto c = a.col_idx[e];
      if (c < 0 || static_cast<std::size_t>(c) >= cols)
        throw InputError("A", 0, fmt::format("column index {} out of range in row {}", c, r));
      if (e > a.row_ptr[r] && c <= a.col_idx[e - 1])
        throw InputError("A", 0,
                         fmt::format("column indices of row {} are not sorted and unique "
                                     "(scipy: A.sum_duplicates(); A.sort_indices())",
                                     r));
    }
  }
  return a;
}

la::Preconditioner preconditioner_of(const std::string& name) {
  if (name == "none") return la::Preconditioner::none;
  if (name == "jacobi") return la::Preconditioner::jacobi;
  throw InputError("preconditioner", 0, fmt::format("unknown preconditioner '{}' (none or jacobi)", name));
}

namespace {

nb::tuple csr_arrays(la::HostCsr<double>&& a) {
  const std::size_t rows = a.rows, cols = a.cols, nnz = a.values.size();
  return nb::make_tuple(to_numpy(std::move(a.values), {nnz}), to_numpy(std::move(a.col_idx), {nnz}),
                        to_numpy(std::move(a.row_ptr), {rows + 1}), nb::make_tuple(rows, cols));
}

la::SolverOptions solver_options(const std::string& solver, const std::string& preconditioner,
                                 const std::string& precision, double tolerance, int max_iterations,
                                 const std::string& launch, int batch) {
  la::SolverOptions o;
  if (solver == "cg")
    o.solver = la::Solver::cg;
  else if (solver == "bicgstab")
    o.solver = la::Solver::bicgstab;
  else if (solver == "pipelined_cg" || solver == "pipelined-cg")
    o.solver = la::Solver::pipelined_cg;
  else if (solver == "pipelined_bicgstab" || solver == "pipelined-bicgstab")
    o.solver = la::Solver::pipelined_bicgstab;
  else
    throw InputError(
        "solver", 0,
        fmt::format("unknown solver '{}' (cg, bicgstab, pipelined_cg or pipelined_bicgstab)", solver));
  o.preconditioner = preconditioner_of(preconditioner);
  if (precision == "fp64")
    o.precision = la::Precision::fp64;
  else if (precision == "fp32")
    o.precision = la::Precision::fp32;
  else
    throw InputError("precision", 0, fmt::format("unknown precision '{}' (fp64 or fp32)", precision));
  if (const auto l = la::launch_from_string(launch))
    o.launch = *l;
  else
    throw InputError("launch", 0, fmt::format("unknown launch '{}' (auto, graph or generated)", launch));
  if (!(tolerance > 0)) throw InputError("tol", 0, "must be positive");
  if (max_iterations < 1) throw InputError("max_iterations", 0, "must be at least 1");
  if (batch < 0) throw InputError("batch", 0, "must be >= 0 (0 = automatic)");
  o.tolerance = tolerance;
  o.max_iterations = max_iterations;
  o.batch = batch;
  return o;
}

// The enum's own names: stable identifiers for code (to_string gives the words the CLI prints).
std::string status_name(la::SolverStatus status) {
  switch (status) {
    case la::SolverStatus::converged:
      return "converged";
    case la::SolverStatus::max_iterations:
      return "max_iterations";
    case la::SolverStatus::breakdown_rho:
      return "breakdown_rho";
    case la::SolverStatus::breakdown_omega:
      return "breakdown_omega";
    case la::SolverStatus::breakdown_alpha:
      return "breakdown_alpha";
    case la::SolverStatus::zero_rhs:
      return "zero_rhs";
  }
  return "unknown";
}

}  // namespace

void bind_linalg(nb::module_& m) {
  bind_linalg_expressions(m);
  bind_linalg_programs(m);
  m.def("solve", [](Array1<std::int32_t> indptr, Array1<std::int32_t> indices, Array1<double> data,
                    std::size_t rows, std::size_t cols, Array1<double> b, const std::string& solver,
                    const std::string& preconditioner, const std::string& precision, double tolerance,
                    int max_iterations, const std::string& launch, int batch, const std::string& device,
                    int threads, bool progress) {
    if (rows != cols)
      throw InputError(
          "A", 0, fmt::format("the matrix is {} x {}; a linear system needs a square matrix", rows, cols));
    if (b.shape(0) != rows)
      throw InputError("b", 0,
                       fmt::format("right-hand side has {} entries, the matrix {} rows", b.shape(0), rows));
    const auto options =
        solver_options(solver, preconditioner, precision, tolerance, max_iterations, launch, batch);
    const Resources resources = resources_for(device, threads, progress);
    la::SolverResult r;
    {
      nb::gil_scoped_release release;
      const auto a = to_csr(indptr, indices, data, rows, cols);
      r = la::solve(resources, a, std::span<const double>(b.data(), b.shape(0)), options);
    }
    nb::dict d;
    const std::size_t n = r.x.size(), history = r.residual_history.size();
    d["x"] = to_numpy(std::move(r.x), {n});
    d["status"] = status_name(r.status);
    d["status_text"] = std::string(la::to_string(r.status));
    d["iterations"] = r.iterations;
    d["relative_residual"] = r.relative_residual;
    d["residual_history"] = to_numpy(std::move(r.residual_history), {history});
    d["seconds"] = r.seconds;
    d["seconds_per_iteration"] = r.seconds_per_iteration;
    d["kernels_per_iteration"] = r.kernels_per_iteration;
    d["host_checks"] = r.host_checks;
    d["backend"] = r.backend;
    return d;
  });
  m.def("poisson_2d", [](std::size_t grid_size) {
    if (grid_size < 1) throw InputError("n", 0, "the grid needs at least one point per side");
    return csr_arrays(la::poisson_2d(grid_size));
  });
  m.def("read_matrix_market", [](const std::string& path) {
    la::HostCsr<double> a;
    {
      nb::gil_scoped_release release;
      a = la::read_matrix_market(path);
    }
    return csr_arrays(std::move(a));
  });
  m.def("read_matrix_market_vector", [](const std::string& path) {
    auto v = la::read_matrix_market_vector(path);
    const std::size_t n = v.size();
    return to_numpy(std::move(v), {n});
  });
}

}  // namespace molaccel::python
