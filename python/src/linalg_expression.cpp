// molaccel._core.linalg: containers (vectors, device scalars, CSR matrices) and the expression
// generator from Python. The Python side (molaccel/_expressions.py) records an expression as a
// tree of tuples over numbered operands; here the tree becomes the library's expression (the
// same operators C++ code uses), the statement a CustomOperation (kept per tree, so each
// distinct statement is planned and compiled once) and the operands its arguments.
#include <map>
#include <mutex>
#include <variant>

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "device_array.hpp"
#include "linalg_common.hpp"
#ifdef MOLACCEL_HAVE_CUDA
#include "linalg/backend.hpp"
#endif

namespace molaccel::python {
namespace {

// A vector or a device scalar: one typed array on the host or on a GPU.
struct Container {
  la::detail::Array data;
  bool scalar = false;
};

struct SparseMatrix {
  la::CsrMatrix<double> f64;
  la::CsrMatrix<float> f32;
  la::ValueType type = la::ValueType::f64;
  la::Argument argument() const { return type == la::ValueType::f64 ? la::Argument(f64) : la::Argument(f32); }
};

la::ValueType parse_dtype(const std::string& dtype) {
  if (dtype == "float64") return la::ValueType::f64;
  if (dtype == "float32") return la::ValueType::f32;
  throw InputError("dtype", 0, fmt::format("linalg containers hold float64 or float32 (got {})", dtype));
}

// Waits for the work queued on the container's device (linalg's in-order stream), so another
// framework may read or write it on any stream.
void synchronize(const Container& c) {
  if (!c.data.where().on_gpu()) return;
#ifdef MOLACCEL_HAVE_CUDA
  la::gpu::synchronize(c.data.where().device);
#endif
}

DeviceView view_of(const Container& c) {
  DeviceView v;
  v.data = c.data.data();
  v.device = c.data.where().on_gpu() ? c.data.where().device : -1;
  v.dtype = c.data.type() == la::ValueType::f64 ? nb::dtype<double>() : nb::dtype<float>();
  v.shape = {c.data.size()};
  return v;
}

// A Python number in an expression is a host scalar passed by value (not a literal folded into
// the code), so changing it between runs reuses the compiled kernel.
using Operand = std::variant<const Container*, const SparseMatrix*, double>;

struct Operands {
  std::vector<Operand> list;
  la::ValueType host_type = la::ValueType::f64;  // the target's element type
};

la::Expression leaf(int index, const Operands& all) {
  const auto& operands = all.list;
  if (index < 0 || static_cast<std::size_t>(index) >= operands.size())
    throw nb::value_error("linalg expression: operand index out of range");
  const Operand& op = operands[index];
  if (auto* c = std::get_if<const Container*>(&op))
    return la::Expression(la::detail::leaf((*c)->scalar ? la::NodeKind::device_scalar : la::NodeKind::vector,
                                           (*c)->data.type(), index));
  if (auto* m = std::get_if<const SparseMatrix*>(&op))
    return la::Expression(la::detail::leaf(la::NodeKind::csr_matrix, (*m)->type, index));
  return la::Expression(la::detail::leaf(la::NodeKind::host_scalar, all.host_type, index));
}

la::Expression binary(const std::string& op, const la::Expression& a, const la::Expression& b) {
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "div") return a / b;
  if (op == "element_prod") return la::element_prod(a, b);
  if (op == "element_div") return la::element_div(a, b);
  if (op == "max") return la::max(a, b);
  if (op == "min") return la::min(a, b);
  if (op == "pow") return la::pow(a, b);
  if (op == "safe_div") return la::safe_div(a, b);
  if (op == "greater") return la::greater(a, b);
  if (op == "inner_prod") return la::inner_prod(a, b);
  if (op == "prod") return la::prod(a, b);
  throw nb::value_error(("linalg expression: unknown operation " + op).c_str());
}

la::Expression unary(const std::string& op, const la::Expression& a) {
  if (op == "neg") return -a;
  if (op == "exp") return la::exp(a);
  if (op == "log") return la::log(a);
  if (op == "sqrt") return la::sqrt(a);
  if (op == "abs") return la::abs(a);
  if (op == "sin") return la::sin(a);
  if (op == "cos") return la::cos(a);
  if (op == "tanh") return la::tanh(a);
  if (op == "nonzero") return la::nonzero(a);
  if (op == "norm_2") return la::norm_2(a);
  throw nb::value_error(("linalg expression: unknown function " + op).c_str());
}

// One CustomOperation per distinct (statement, operand kinds and types): planned and compiled
// once, reused by every later run. A CustomOperation runs one call at a time.
struct KeptOperation {
  std::mutex mutex;
  std::unique_ptr<la::CustomOperation> operation;
};

std::string kind_key(const Operands& all) {
  std::string key = fmt::format("{}:", int(all.host_type));
  for (const auto& op : all.list) {
    if (auto* c = std::get_if<const Container*>(&op))
      key += fmt::format("{}{}", (*c)->scalar ? 's' : 'v', int((*c)->data.type()));
    else if (auto* m = std::get_if<const SparseMatrix*>(&op))
      key += fmt::format("m{}", int((*m)->type));
    else
      key += 'h';
  }
  return key;
}

void execute(int target, const std::string& assign, nb::handle tree, nb::list operand_objects) {
  Operands all;
  auto& operands = all.list;
  for (nb::handle o : operand_objects) {
    if (nb::isinstance<Container>(o))
      operands.emplace_back(nb::inst_ptr<Container>(o));
    else if (nb::isinstance<SparseMatrix>(o))
      operands.emplace_back(nb::inst_ptr<SparseMatrix>(o));
    else
      operands.emplace_back(nb::cast<double>(o));
  }
  if (target < 0 || static_cast<std::size_t>(target) >= operands.size() ||
      !std::holds_alternative<const Container*>(operands[target]))
    throw nb::value_error("linalg expression: the target must be a vector or a device scalar");
  all.host_type = std::get<const Container*>(operands[target])->data.type();
  static std::mutex table_mutex;
  static std::map<std::string, std::shared_ptr<KeptOperation>> table;
  const std::string key = nb::cast<std::string>(nb::repr(tree)) + "|" + assign + "|" +
                          std::to_string(target) + "|" + kind_key(all);
  std::shared_ptr<KeptOperation> kept;
  {
    std::lock_guard lock(table_mutex);
    auto& slot = table[key];
    if (!slot) {
      slot = std::make_shared<KeptOperation>();
      const la::Expression value = build_expression(tree, [&](const std::string& head, nb::tuple t) {
        if (head != "operand") throw nb::value_error(("linalg expression: unknown leaf " + head).c_str());
        return leaf(nb::cast<int>(t[1]), all);
      });
      const la::Expression target_leaf = leaf(target, all);
      const la::AssignOp op = assign == "="    ? la::AssignOp::assign
                              : assign == "+=" ? la::AssignOp::add_assign
                                               : la::AssignOp::subtract_assign;
      try {
        slot->operation =
            std::make_unique<la::CustomOperation>(la::Statement(target_leaf.node(), op, value.node()));
      } catch (...) {
        table.erase(key);
        throw;
      }
    }
    kept = slot;
  }
  std::vector<la::Argument> args;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Operand& op = operands[i];
    if (auto* c = std::get_if<const Container*>(&op)) {
      la::Argument a(0.0);
      a.what = (*c)->scalar ? la::Argument::Kind::device_scalar : la::Argument::Kind::vector;
      a.type = (*c)->data.type();
      a.data = &(*c)->data;
      a.rows = (*c)->data.size();
      a.cols = 1;
      args.push_back(a);
    } else if (auto* m = std::get_if<const SparseMatrix*>(&op)) {
      args.push_back((*m)->argument());
    } else if (all.host_type == la::ValueType::f32) {
      args.emplace_back(static_cast<float>(std::get<double>(op)));
    } else {
      args.emplace_back(std::get<double>(op));
    }
  }
  nb::gil_scoped_release release;
  std::lock_guard lock(kept->mutex);
  kept->operation->run(args);
}

}  // namespace

la::Expression build_expression(nb::handle tree, const LeafMaker& leaf) {
  // The modifiers seen so far, by name and body (each made once).
  static std::map<std::string, la::ElementwiseModifier> modifiers;
  nb::tuple t = nb::cast<nb::tuple>(tree);
  const std::string op = nb::cast<std::string>(t[0]);
  if (op == "modifier") {
    const std::string name = nb::cast<std::string>(t[1]), body = nb::cast<std::string>(t[2]);
    auto it = modifiers.find(name + "\n" + body);
    if (it == modifiers.end())
      it = modifiers.emplace(name + "\n" + body, la::ElementwiseModifier(name, body)).first;
    return it->second(build_expression(t[3], leaf));
  }
  if (t.size() == 2 && !nb::isinstance<nb::tuple>(t[1])) return leaf(op, t);
  if (t.size() == 2) return unary(op, build_expression(t[1], leaf));
  return binary(op, build_expression(t[1], leaf), build_expression(t[2], leaf));
}

void bind_linalg_expressions(nb::module_& m) {
  nb::class_<Container>(m, "Container")
      .def("__init__",
           [](Container* c, nb::ndarray<nb::ro, nb::ndim<1>, nb::c_contig, nb::device::cpu> values,
              const std::string& dtype, bool scalar, const std::string& device, int threads) {
             const auto type = parse_dtype(dtype);
             if (values.dtype() != (type == la::ValueType::f64 ? nb::dtype<double>() : nb::dtype<float>()))
               throw nb::type_error("linalg container: the values' dtype differs from dtype");
             const la::Placement where = la::placement_of(resources_for(device, threads, false));
             new (c) Container{la::detail::Array(where, type, values.shape(0)), scalar};
             c->data.upload(values.data(), values.shape(0));
           })
      .def("__len__", [](const Container& c) { return c.data.size(); })
      .def_prop_ro(
          "dtype",
          [](const Container& c) { return c.data.type() == la::ValueType::f64 ? "float64" : "float32"; })
      .def_prop_ro("device", [](const Container& c) { return c.data.where().device; })
      .def_prop_ro("pointer",
                   [](const Container& c) { return reinterpret_cast<std::uintptr_t>(c.data.data()); })
      .def("synchronize",
           [](const Container& c) {
             nb::gil_scoped_release release;
             synchronize(c);
           })
      .def("to_numpy",
           [](const Container& c) -> nb::object {
             const std::size_t n = c.data.size();
             if (c.data.type() == la::ValueType::f64) {
               std::vector<double> v(n);
               {
                 nb::gil_scoped_release release;
                 c.data.download(v.data(), n);
               }
               return nb::cast(to_numpy(std::move(v), {n}));
             }
             std::vector<float> v(n);
             {
               nb::gil_scoped_release release;
               c.data.download(v.data(), n);
             }
             return nb::cast(to_numpy(std::move(v), {n}));
           })
      // The memory handed out without a copy (device_array.hpp), after the queued work is done;
      // `self` stays alive while a consumer's view exists.
      .def(
          "view",
          [](nb::handle self, nb::handle stream) {
            const Container& c = nb::cast<const Container&>(self);
            {
              nb::gil_scoped_release release;
              synchronize(c);
            }
            return dlpack_array(self, view_of(c), stream);
          },
          nb::arg("stream").none() = nb::none())
      .def("cuda_array_interface", [](const Container& c) {
        {
          nb::gil_scoped_release release;
          synchronize(c);
        }
        return cuda_array_interface(view_of(c));
      });

  nb::class_<SparseMatrix>(m, "SparseMatrix")
      .def("__init__",
           [](SparseMatrix* s,
              nb::ndarray<const std::int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> indptr,
              nb::ndarray<const std::int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> indices,
              nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu> data, std::size_t rows,
              std::size_t cols, const std::string& dtype, const std::string& device, int threads) {
             la::HostCsr<double> a;
             a.rows = rows;
             a.cols = cols;
             if (indptr.shape(0) != rows + 1 || indices.shape(0) != data.shape(0))
               throw InputError("A", 0, "the CSR arrays do not describe a matrix of this shape");
             a.row_ptr.assign(indptr.data(), indptr.data() + indptr.shape(0));
             a.col_idx.assign(indices.data(), indices.data() + indices.shape(0));
             a.values.assign(data.data(), data.data() + data.shape(0));
             const auto type = parse_dtype(dtype);
             const la::Placement where = la::placement_of(resources_for(device, threads, false));
             new (s) SparseMatrix();
             s->type = type;
             if (type == la::ValueType::f64)
               s->f64 = la::CsrMatrix<double>(where, a);
             else
               s->f32 = la::CsrMatrix<float>(where, a);
           })
      .def_prop_ro("shape", [](const SparseMatrix& s) {
        return s.type == la::ValueType::f64 ? std::make_tuple(s.f64.rows(), s.f64.cols())
                                            : std::make_tuple(s.f32.rows(), s.f32.cols());
      });

  m.def("execute", &execute);
}

}  // namespace molaccel::python
