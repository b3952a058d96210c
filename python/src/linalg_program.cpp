// molaccel._core.linalg.Program: a whole iterative method (linalg_program.hpp) written in
// Python. The Python side (molaccel/_programs.py) declares symbols, records each statement as
// (target symbol, "=" | "+=" | "-=", tree) with leaves ("symbol", i) and ("constant", value), and
// runs the program with run_program (a GPU: one generated kernel; the CPU: one fused loop per step).
#include <map>

#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "linalg/program/program_plan.hpp"
#include "linalg_common.hpp"
#include "molaccel/linalg_program.hpp"

namespace molaccel::python {
namespace {

struct PyProgram {
  la::Program program;
};

// The program's vector `index` as an assignment target (the Program call checks it is one).
la::Assignable vector_leaf(const PyProgram& p, int index) {
  return la::Assignable(la::detail::leaf(la::NodeKind::vector, p.program.type(), index));
}

la::ValueType program_dtype(const std::string& dtype) {
  if (dtype == "float64") return la::ValueType::f64;
  if (dtype == "float32") return la::ValueType::f32;
  throw InputError("dtype", 0, fmt::format("a program computes in float64 or float32 (got {})", dtype));
}

std::string kind_name(la::NodeKind kind) {
  return kind == la::NodeKind::vector ? "vector" : kind == la::NodeKind::device_scalar ? "scalar" : "matrix";
}

la::Expression program_expression(const la::Program& p, nb::handle tree) {
  return build_expression(tree, [&](const std::string& head, nb::tuple t) {
    if (head == "constant") {
      auto n = std::make_shared<la::ExpressionNode>();
      n->kind = la::NodeKind::constant;
      n->type = p.type();
      n->constant = nb::cast<double>(t[1]);
      return la::Expression(n);
    }
    if (head != "symbol") throw nb::value_error(("linalg program: unknown leaf " + head).c_str());
    const int i = nb::cast<int>(t[1]);
    if (i < 0 || std::size_t(i) >= p.symbols().size())
      throw nb::value_error("linalg program: symbol index out of range");
    return la::Expression(la::detail::leaf(p.symbols()[std::size_t(i)].kind, p.type(), i));
  });
}

// (target, op, tree) triples: one step's simultaneous statements.
std::vector<la::Statement> statements(const la::Program& p, const nb::list& items) {
  std::vector<la::Statement> out;
  for (nb::handle item : items) {
    nb::tuple t = nb::cast<nb::tuple>(item);
    const int target = nb::cast<int>(t[0]);
    const std::string op = nb::cast<std::string>(t[1]);
    if (target < 0 || std::size_t(target) >= p.symbols().size() ||
        p.symbols()[std::size_t(target)].kind == la::NodeKind::csr_matrix)
      throw nb::value_error(
          "linalg program: a statement's target must be a vector or a scalar of the program");
    const la::AssignOp assign = op == "="    ? la::AssignOp::assign
                                : op == "+=" ? la::AssignOp::add_assign
                                : op == "-="
                                    ? la::AssignOp::subtract_assign
                                    : throw nb::value_error("linalg program: assignment must be =, += or -=");
    out.emplace_back(la::detail::leaf(p.symbols()[std::size_t(target)].kind, p.type(), target), assign,
                     program_expression(p, t[2]).node());
  }
  return out;
}

nb::dict run(const PyProgram& self, nb::object indptr, nb::object indices, nb::object data, std::size_t rows,
             std::size_t cols, const std::map<std::string, Array1<double>>& vectors,
             const std::map<std::string, double>& scalars, int max_iterations, const std::string& device,
             int threads) {
  if (max_iterations < 0) throw InputError("max_iterations", 0, "must be >= 0");
  la::HostCsr<double> a;
  la::ProgramInputs inputs;
  if (!indptr.is_none()) {
    a = to_csr(nb::cast<Array1<std::int32_t>>(indptr), nb::cast<Array1<std::int32_t>>(indices),
               nb::cast<Array1<double>>(data), rows, cols);
    if (rows != cols) throw InputError("A", 0, fmt::format("the matrix is {} x {}, not square", rows, cols));
    inputs.matrix = &a;
  }
  for (const auto& [name, v] : vectors) inputs.vectors[name].assign(v.data(), v.data() + v.shape(0));
  inputs.scalars = scalars;
  inputs.max_iterations = max_iterations;
  const Resources resources = resources_for(device, threads, false);
  la::ProgramResult r;
  {
    nb::gil_scoped_release release;
    r = la::run_program(resources, self.program, inputs);
  }
  nb::dict d;
  d["status"] = r.status;
  d["iterations"] = r.iterations;
  nb::dict out_vectors, out_scalars;
  for (auto& [name, v] : r.vectors) {
    const std::size_t n = v.size();
    out_vectors[name.c_str()] = to_numpy(std::move(v), {n});
  }
  for (const auto& [name, v] : r.scalars) out_scalars[name.c_str()] = v;
  d["vectors"] = out_vectors;
  d["scalars"] = out_scalars;
  nb::list history;
  for (auto& h : r.monitor_history) {
    const std::size_t n = h.size();
    history.append(to_numpy(std::move(h), {n}));
  }
  d["monitor_history"] = history;
  d["barriers_per_iteration"] = r.barriers_per_iteration;
  d["seconds"] = r.seconds;
  d["kernel"] = r.kernel;
  return d;
}

}  // namespace

void bind_linalg_programs(nb::module_& m) {
  nb::class_<PyProgram>(m, "Program")
      .def("__init__",
           [](PyProgram* p, const std::string& name, const std::string& dtype) {
             new (p) PyProgram{la::Program(name, program_dtype(dtype))};
           })
      .def_prop_ro("name", [](const PyProgram& p) { return p.program.name(); })
      .def_prop_ro(
          "dtype",
          [](const PyProgram& p) { return p.program.type() == la::ValueType::f64 ? "float64" : "float32"; })
      // (name, "vector" | "scalar" | "matrix") in order of declaration (= the symbol's index).
      .def_prop_ro("symbols",
                   [](const PyProgram& p) {
                     std::vector<std::pair<std::string, std::string>> out;
                     for (const auto& s : p.program.symbols()) out.emplace_back(s.name, kind_name(s.kind));
                     return out;
                   })
      .def("declare",
           [](PyProgram& p, const std::string& name, const std::string& kind) {
             if (kind == "vector")
               p.program.vector(name);
             else if (kind == "scalar")
               p.program.scalar(name);
             else if (kind == "matrix")
               p.program.matrix(name);
             else
               throw nb::value_error("linalg program: a symbol is a vector, a scalar or a matrix");
             return int(p.program.symbols().size()) - 1;
           })
      .def("setup", [](PyProgram& p, nb::list items) { p.program.setup(statements(p.program, items)); })
      .def("step", [](PyProgram& p, nb::list items) { p.program.step(statements(p.program, items)); })
      .def("stop_when",
           [](PyProgram& p, nb::handle tree, const std::string& status) {
             p.program.stop_when(program_expression(p.program, tree), status);
           })
      .def("monitor",
           [](PyProgram& p, nb::handle tree) { p.program.monitor(program_expression(p.program, tree)); })
      // target = A^T source before the setup (Program::transposed_product); symbol indices.
      .def("transposed_product",
           [](PyProgram& p, int target, int source) {  // Program checks both are its vectors
             p.program.transposed_product(vector_leaf(p, target), vector_leaf(p, source));
           })
      // target = diag(A)^-1 before the setup (Program::inverse_diagonal); a symbol index.
      .def("inverse_diagonal",
           [](PyProgram& p, int target) {  // Program checks it is its vector
             p.program.inverse_diagonal(vector_leaf(p, target));
           })
      .def_prop_ro(
          "barriers_per_iteration",
          [](const PyProgram& p) { return la::program::plan_program(p.program).barriers_per_iteration(); })
      .def("describe",
           [](const PyProgram& p) {
             return la::program::describe(p.program, la::program::plan_program(p.program));
           })
      .def("cuda_source", [](const PyProgram& p) { return la::program_cuda_source(p.program); })
      .def("run", &run, nb::arg("indptr").none(), nb::arg("indices").none(), nb::arg("data").none(),
           nb::arg("rows"), nb::arg("cols"), nb::arg("vectors"), nb::arg("scalars"),
           nb::arg("max_iterations"), nb::arg("device"), nb::arg("threads"));

  // The methods written as programs (cg, bicgstab, pipelined_cg, pipelined_bicgstab,
  // one_barrier_bicgstab).
  // "jacobi" preconditions cg, bicgstab and one_barrier_bicgstab as solve() does.
  m.def("method_program", [](const std::string& name, const std::string& dtype, const std::string& pre) {
    const la::ValueType type = program_dtype(dtype);
    const la::Preconditioner preconditioner = preconditioner_of(pre);
    if (name == "cg") return PyProgram{la::cg_program(type, preconditioner)};
    if (name == "bicgstab") return PyProgram{la::bicgstab_program(type, preconditioner)};
    if (name == "one_barrier_bicgstab")
      return PyProgram{la::one_barrier_bicgstab_program(type, preconditioner)};
    if (preconditioner != la::Preconditioner::none)
      throw InputError(
          "preconditioner", 0,
          fmt::format("{} is written unpreconditioned (jacobi: cg, bicgstab, one_barrier_bicgstab)", name));
    if (name == "pipelined_cg") return PyProgram{la::pipelined_cg_program(type)};
    if (name == "pipelined_bicgstab") return PyProgram{la::pipelined_bicgstab_program(type)};
    throw InputError("method", 0,
                     fmt::format("unknown method '{}' (cg, bicgstab, pipelined_cg, pipelined_bicgstab or "
                                 "one_barrier_bicgstab)",
                                 name));
  });
}

}  // namespace molaccel::python
