// molaccel linalg: a run-time generator of fused linear-algebra kernels (after ViennaCL's
// generator, Tillet, Rupp & Selberherr) and the Krylov solvers built from it.
//
//   using namespace molaccel::linalg;
//   SymbolicVector<double, 0> sx;  SymbolicVector<double, 1> sy;  SymbolicVector<double, 2> sz;
//   CustomOperation add(sx = sy + sz);           // kernel "vec0_eq_vec1_plus_vec2"
//   add(x, y, z);                                  // x, y, z: linalg::Vector<double>
//
// Containers live where their Resources say: on the first selected GPU, or in host memory (CPU
// workers and CPU-only builds), so every operation and solver also runs on the CPU. The same
// expression tree is turned into CUDA source (compiled with NVRTC at run time) or evaluated by the
// CPU backend in one fused, threaded, vectorised loop. This header is CUDA-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel::linalg {

// ---------------------------------------------------------------------------------------------
// Element types and placement.
// ---------------------------------------------------------------------------------------------
enum class ValueType : std::uint8_t { f32, f64, i32 };
std::string_view to_string(ValueType type);
std::size_t size_of(ValueType type);

template <class T>
constexpr ValueType value_type_of() {
  if constexpr (std::is_same_v<T, float>)
    return ValueType::f32;
  else if constexpr (std::is_same_v<T, double>)
    return ValueType::f64;
  else {
    static_assert(std::is_same_v<T, std::int32_t>, "linalg supports float, double (and int32 indices)");
    return ValueType::i32;
  }
}

// Where a container's memory lives: GPU `device` (>= 0) or host memory (-1). Host containers
// remember how many threads the CPU backend may use on them (0 = all cores).
struct Placement {
  int device = -1;
  int cpu_threads = 0;
  bool on_gpu() const { return device >= 0; }
  bool operator==(const Placement& o) const { return device == o.device; }
  std::string describe() const;
};
// The first GPU of `resources`, or the host when it uses no GPU.
Placement placement_of(const Resources& resources);

namespace detail {
struct Storage;  // host or device bytes (src/linalg/containers.cpp)

// Untyped array: the one owner of memory behind every container. Views (a vector element used
// as a scalar) share the storage with an offset.
class Array {
 public:
  Array() = default;
  Array(const Placement& where, ValueType type, std::size_t count);  // zero-filled
  std::size_t size() const { return count_; }
  ValueType type() const { return type_; }
  const Placement& where() const;
  void* data() const;  // device or host address of element 0
  void upload(const void* host, std::size_t count, std::size_t first = 0);
  void download(void* host, std::size_t count, std::size_t first = 0) const;  // synchronises
  Array view(std::size_t first, std::size_t count) const;
  bool empty_handle() const { return !storage_; }

 private:
  std::shared_ptr<Storage> storage_;
  std::size_t offset_ = 0, count_ = 0;
  ValueType type_ = ValueType::f64;
};
}  // namespace detail

template <class T>
class Scalar;

// A dense vector of n elements of T.
template <class T>
class Vector {
 public:
  Vector() = default;
  Vector(const Resources& resources, std::size_t n) : Vector(placement_of(resources), n) {}
  Vector(const Placement& where, std::size_t n) : data_(where, value_type_of<T>(), n) {}
  Vector(const Resources& resources, std::span<const T> values) : Vector(resources, values.size()) {
    copy_from_host(values);
  }
  std::size_t size() const { return data_.size(); }
  const Placement& where() const { return data_.where(); }
  void copy_from_host(std::span<const T> values) {
    MOLACCEL_EXPECTS(values.size() == size(), "Vector::copy_from_host: size mismatch");
    data_.upload(values.data(), values.size());
  }
  std::vector<T> to_host() const {
    std::vector<T> out(size());
    data_.download(out.data(), out.size());
    return out;
  }
  // Element i as a device scalar (shares memory): lets solvers keep per-iteration scalars in
  // one array that is copied to the host once per batch of iterations.
  Scalar<T> element(std::size_t i) const;
  const detail::Array& raw() const { return data_; }

 private:
  detail::Array data_;
};

// A scalar: either a host value (passed to kernels by value) or a value in device memory
// (passed by address, so it can be produced and consumed on the GPU without a host round trip).
template <class T>
class Scalar {
 public:
  Scalar(T host_value = T(0)) : host_value_(host_value) {}  // host value
  Scalar(const Resources& resources, T value) : Scalar(placement_of(resources), value) {}
  Scalar(const Placement& where, T value) : data_(where, value_type_of<T>(), 1) { set(value); }
  bool on_host() const { return data_.empty_handle(); }
  T value() const {
    if (on_host()) return host_value_;
    T v;
    data_.download(&v, 1);
    return v;
  }
  void set(T v) {
    if (on_host())
      host_value_ = v;
    else
      data_.upload(&v, 1);
  }
  const detail::Array& raw() const { return data_; }
  static Scalar view(const detail::Array& a) {
    Scalar s;
    s.data_ = a;
    return s;
  }

 private:
  T host_value_ = T(0);
  detail::Array data_;
};

template <class T>
Scalar<T> Vector<T>::element(std::size_t i) const {
  MOLACCEL_EXPECTS(i < size(), "Vector::element: index out of range");
  return Scalar<T>::view(data_.view(i, 1));
}

// Dense row-major matrix whose rows are padded to a multiple of 32 elements (aligned,
// coalesced row access on the GPU and whole SIMD vectors on the CPU).
template <class T>
class Matrix {
 public:
  Matrix() = default;
  Matrix(const Resources& resources, std::size_t rows, std::size_t cols)
      : Matrix(placement_of(resources), rows, cols) {}
  Matrix(const Placement& where, std::size_t rows, std::size_t cols)
      : rows_(rows), cols_(cols), ld_(padded(cols)), data_(where, value_type_of<T>(), rows * padded(cols)) {}
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  std::size_t leading_dimension() const { return ld_; }
  const Placement& where() const { return data_.where(); }
  // `values` is row-major rows x cols (unpadded).
  void copy_from_host(std::span<const T> values) {
    MOLACCEL_EXPECTS(values.size() == rows_ * cols_, "Matrix::copy_from_host: size mismatch");
    std::vector<T> padded_rows(rows_ * ld_, T(0));
    for (std::size_t r = 0; r < rows_; ++r)
      for (std::size_t c = 0; c < cols_; ++c) padded_rows[r * ld_ + c] = values[r * cols_ + c];
    data_.upload(padded_rows.data(), padded_rows.size());
  }
  std::vector<T> to_host() const {  // row-major rows x cols
    std::vector<T> padded_rows(rows_ * ld_), out(rows_ * cols_);
    data_.download(padded_rows.data(), padded_rows.size());
    for (std::size_t r = 0; r < rows_; ++r)
      for (std::size_t c = 0; c < cols_; ++c) out[r * cols_ + c] = padded_rows[r * ld_ + c];
    return out;
  }
  const detail::Array& raw() const { return data_; }
  static std::size_t padded(std::size_t cols) { return (cols + 31) / 32 * 32; }

 private:
  std::size_t rows_ = 0, cols_ = 0, ld_ = 0;
  detail::Array data_;
};

// Compressed sparse rows on the host: the exchange format of the I/O functions.
template <class T>
struct HostCsr {
  std::size_t rows = 0, cols = 0;
  std::vector<std::int32_t> row_ptr{0};  // rows + 1 entries
  std::vector<std::int32_t> col_idx;     // sorted within each row, no duplicates
  std::vector<T> values;
  std::size_t nnz() const { return values.size(); }
};

// Sparse matrix (CSR, 32-bit indices) in device or host memory.
template <class T>
class CsrMatrix {
 public:
  CsrMatrix() = default;
  template <class U>
  CsrMatrix(const Resources& resources, const HostCsr<U>& a) : CsrMatrix(placement_of(resources), a) {}
  template <class U>
  CsrMatrix(const Placement& where, const HostCsr<U>& a)
      : rows_(a.rows),
        cols_(a.cols),
        row_ptr_(where, ValueType::i32, a.row_ptr.size()),
        col_idx_(where, ValueType::i32, a.col_idx.size()),
        values_(where, value_type_of<T>(), a.values.size()) {
    MOLACCEL_EXPECTS(a.row_ptr.size() == a.rows + 1 && a.col_idx.size() == a.values.size(),
                     "CsrMatrix: inconsistent HostCsr");
    std::vector<T> converted(a.values.begin(), a.values.end());
    row_ptr_.upload(a.row_ptr.data(), a.row_ptr.size());
    col_idx_.upload(a.col_idx.data(), a.col_idx.size());
    values_.upload(converted.data(), converted.size());
  }
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  std::size_t nnz() const { return values_.size(); }
  const Placement& where() const { return values_.where(); }
  const detail::Array& row_ptr() const { return row_ptr_; }
  const detail::Array& col_idx() const { return col_idx_; }
  const detail::Array& values() const { return values_; }

 private:
  std::size_t rows_ = 0, cols_ = 0;
  detail::Array row_ptr_, col_idx_, values_;
};

// ---------------------------------------------------------------------------------------------
// Symbolic expressions. An expression is an immutable tree; leaves are numbered operands that
// are bound to containers when the operation runs (the paper's SymbolicVector<T, i>).
// ---------------------------------------------------------------------------------------------
enum class NodeKind : std::uint8_t {
  vector,
  dense_matrix,
  csr_matrix,
  host_scalar,
  device_scalar,
  constant,
  placeholder,
  negate,
  add,
  subtract,
  multiply,
  divide,
  element_product,
  element_division,
  function,         // unary: exp log sqrt abs sin cos tanh nonzero (1 if x != 0)
  binary_function,  // max min pow safe_div (0 when the divisor is 0) greater (1 if a > b)
  modifier,         // children: argument, body (an expression in `placeholder` X)
  inner_product,
  norm_2,
  matrix_product,
  temporary  // a materialised operand (index into the plan's temporaries), made by the planner
};
enum class Shape : std::uint8_t { scalar, vector, matrix };

struct ExpressionNode {
  NodeKind kind = NodeKind::constant;
  ValueType type = ValueType::f64;
  linalg::Shape shape = linalg::Shape::scalar;
  int index = -1;       // operand number for leaves
  double constant = 0;  // NodeKind::constant
  std::string name;     // function / modifier name
  std::vector<std::shared_ptr<const ExpressionNode>> children;
};
using NodePtr = std::shared_ptr<const ExpressionNode>;

class Statement;

class Expression {
 public:
  explicit Expression(NodePtr node) : node_(std::move(node)) {}
  const NodePtr& node() const { return node_; }
  std::string to_string() const;  // infix form, e.g. "vec1 + 2 * vec2"

 private:
  NodePtr node_;
};

enum class AssignOp : std::uint8_t { assign, add_assign, subtract_assign };

class Statement {
 public:
  Statement(NodePtr target, AssignOp op, NodePtr value);
  const NodePtr& target() const { return target_; }
  AssignOp op() const { return op_; }
  const NodePtr& value() const { return value_; }

 private:
  NodePtr target_;
  AssignOp op_;
  NodePtr value_;
};

namespace detail {
NodePtr leaf(NodeKind kind, ValueType type, int index);
}

// An assignable symbolic operand (vector, dense matrix or device scalar): `sx = expr` makes a
// statement.
class Assignable : public Expression {
 public:
  using Expression::Expression;
  Statement operator=(const Expression& value) const { return {node(), AssignOp::assign, value.node()}; }
  Statement operator=(const Assignable& value) const { return {node(), AssignOp::assign, value.node()}; }
  Statement operator+=(const Expression& value) const { return {node(), AssignOp::add_assign, value.node()}; }
  Statement operator-=(const Expression& value) const {
    return {node(), AssignOp::subtract_assign, value.node()};
  }
};

template <class T, int I>
struct SymbolicVector : Assignable {
  SymbolicVector() : Assignable(detail::leaf(NodeKind::vector, value_type_of<T>(), I)) {}
  using Assignable::operator=;
  Statement operator=(const SymbolicVector& value) const { return {node(), AssignOp::assign, value.node()}; }
};
// A dense matrix: the first argument of prod(), an operand of element-wise expressions over
// matrices of the same shape and scalars, and an assignment target (`A = alpha * B + C`,
// `A += element_prod(B, C)`, `A = exp(B)`; every matrix of such an operation has the target's
// rows and columns, checked at run time).
template <class T, int I>
struct SymbolicMatrix : Assignable {
  SymbolicMatrix() : Assignable(detail::leaf(NodeKind::dense_matrix, value_type_of<T>(), I)) {}
  using Assignable::operator=;
  Statement operator=(const SymbolicMatrix& value) const { return {node(), AssignOp::assign, value.node()}; }
};
template <class T, int I>
struct SymbolicCsrMatrix : Expression {
  SymbolicCsrMatrix() : Expression(detail::leaf(NodeKind::csr_matrix, value_type_of<T>(), I)) {}
};
// A scalar passed by value from the host (a T, or a host scalar<T>).
template <class T, int I>
struct CpuSymbolicScalar : Expression {
  CpuSymbolicScalar() : Expression(detail::leaf(NodeKind::host_scalar, value_type_of<T>(), I)) {}
};
// A scalar in device memory (scalar<T> created with Resources); may be assigned to.
template <class T, int I>
struct GpuSymbolicScalar : Assignable {
  GpuSymbolicScalar() : Assignable(detail::leaf(NodeKind::device_scalar, value_type_of<T>(), I)) {}
  using Assignable::operator=;
  Statement operator=(const GpuSymbolicScalar& value) const {
    return {node(), AssignOp::assign, value.node()};
  }
};

// Arithmetic. Scalars broadcast over vectors; vector * vector is an error (use element_prod).
Expression operator+(const Expression& a, const Expression& b);
Expression operator-(const Expression& a, const Expression& b);
Expression operator*(const Expression& a, const Expression& b);
Expression operator/(const Expression& a, const Expression& b);
Expression operator-(const Expression& a);
Expression operator+(const Expression& a, double b);
Expression operator+(double a, const Expression& b);
Expression operator-(const Expression& a, double b);
Expression operator-(double a, const Expression& b);
Expression operator*(const Expression& a, double b);
Expression operator*(double a, const Expression& b);
Expression operator/(const Expression& a, double b);
Expression operator/(double a, const Expression& b);
Expression element_prod(const Expression& a, const Expression& b);
Expression element_div(const Expression& a, const Expression& b);
Expression exp(const Expression& a);
Expression log(const Expression& a);
Expression sqrt(const Expression& a);
Expression abs(const Expression& a);
Expression sin(const Expression& a);
Expression cos(const Expression& a);
Expression tanh(const Expression& a);
Expression nonzero(const Expression& a);  // 1 where a != 0, else 0
Expression max(const Expression& a, const Expression& b);
Expression min(const Expression& a, const Expression& b);
Expression pow(const Expression& a, const Expression& b);
Expression safe_div(const Expression& a, const Expression& b);  // a / b, or 0 where b == 0
Expression greater(const Expression& a, const Expression& b);   // 1 where a > b, else 0
Expression inner_prod(const Expression& a, const Expression& b);
Expression norm_2(const Expression& a);
Expression prod(const Expression& matrix, const Expression& vector);

// An element-wise modifier from an expression in X (the paper's VIENNACL_EW_MODIFIER):
// numbers, X, + - * /, parentheses and the functions above, e.g. "1/(1+X)" or "max(X, 0)".
class ElementwiseModifier {
 public:
  ElementwiseModifier(std::string name, std::string body);  // throws InputError on bad text
  Expression operator()(const Expression& argument) const;
  const std::string& name() const { return name_; }
  const std::string& body() const { return body_; }

 private:
  std::string name_, body_;
};
#define MOLACCEL_EW_MODIFIER(NAME, BODY) const ::molaccel::linalg::ElementwiseModifier NAME(#NAME, BODY)

// ---------------------------------------------------------------------------------------------
// CustomOperation: one or several simultaneous statements compiled into fused kernels.
// ---------------------------------------------------------------------------------------------
// A run-time operand of an operation, converted implicitly from the containers.
struct Argument {
  enum class Kind : std::uint8_t { vector, dense_matrix, csr_matrix, host_value, device_scalar };
  Kind what = Kind::host_value;
  ValueType type = ValueType::f64;
  double host_value = 0;
  const detail::Array* data = nullptr;  // vector / scalar storage, matrix values
  const detail::Array* row_ptr = nullptr;
  const detail::Array* col_idx = nullptr;
  std::size_t rows = 0, cols = 0, ld = 0;

  Argument(float v) : what(Kind::host_value), type(ValueType::f32), host_value(v) {}
  Argument(double v) : what(Kind::host_value), type(ValueType::f64), host_value(v) {}
  template <class T>
  Argument(const Vector<T>& v)
      : what(Kind::vector), type(value_type_of<T>()), data(&v.raw()), rows(v.size()), cols(1) {}
  template <class T>
  Argument(const Scalar<T>& s)
      : what(s.on_host() ? Kind::host_value : Kind::device_scalar),
        type(value_type_of<T>()),
        host_value(s.on_host() ? double(s.value()) : 0.0),
        data(s.on_host() ? nullptr : &s.raw()) {}
  template <class T>
  Argument(const Matrix<T>& m)
      : what(Kind::dense_matrix),
        type(value_type_of<T>()),
        data(&m.raw()),
        rows(m.rows()),
        cols(m.cols()),
        ld(m.leading_dimension()) {}
  template <class T>
  Argument(const CsrMatrix<T>& m)
      : what(Kind::csr_matrix),
        type(value_type_of<T>()),
        data(&m.values()),
        row_ptr(&m.row_ptr()),
        col_idx(&m.col_idx()),
        rows(m.rows()),
        cols(m.cols()) {}
};

struct OperationPlan;  // analysed statements (src/linalg/plan.hpp)

class CustomOperation {
 public:
  explicit CustomOperation(Statement s) : CustomOperation(std::vector<Statement>{std::move(s)}) {}
  // Several statements with simultaneous semantics: every right-hand side sees the values from
  // before the operation (the plane rotation `sx = sx + sy, sy = -sx + sy` uses the old x).
  template <class... More>
  CustomOperation(Statement first, Statement second, More... more)
      : CustomOperation(std::vector<Statement>{std::move(first), std::move(second), std::move(more)...}) {}
  explicit CustomOperation(std::vector<Statement> statements);
  ~CustomOperation();
  CustomOperation(CustomOperation&&) noexcept;
  CustomOperation& operator=(CustomOperation&&) noexcept;

  // Runs on the operands' device (all operands must share it); asynchronous on a GPU (ordered
  // with every other linalg operation on that device; to_host() synchronises).
  template <class... Args>
  void operator()(const Args&... args) {
    run({Argument(args)...});
  }
  void run(const std::vector<Argument>& args);

  const std::string& name() const;  // e.g. "vec0_eq_vec1_plus_vec2"
  std::string cuda_source() const;  // the generated CUDA translation unit
  std::vector<std::string> kernel_names() const;
  int kernels_per_run() const;           // launches per run on a GPU
  std::string last_cpu_variant() const;  // "avx2" etc: which CPU build ran last
  const OperationPlan& plan() const;

 private:
  std::unique_ptr<OperationPlan> plan_;
  struct state;
  std::shared_ptr<state> state_;
};

// The plain loop-per-operation oracle: evaluates the statements on host doubles, one loop per
// tree node. Operands: vectors/scalars as `values` (scalars one element), matrices dense
// row-major (rows x cols) or CSR. Used by the tests; shares no code with the fast paths.
struct ReferenceOperand {
  std::vector<double> values;
  std::size_t rows = 0, cols = 0;
  const HostCsr<double>* csr = nullptr;
};
void reference_execute(const std::vector<Statement>& statements, std::vector<ReferenceOperand>& operands);

// ---------------------------------------------------------------------------------------------
// Matrix Market I/O and test systems.
// ---------------------------------------------------------------------------------------------
// Reads a coordinate or array file (real, integer or pattern; general or symmetric) into CSR
// (symmetric entries mirrored, duplicates summed). Errors: InputError with the line number.
HostCsr<double> read_matrix_market(const std::filesystem::path& path);
HostCsr<double> parse_matrix_market(std::string_view name, std::string_view content);
// A vector: an n x 1 (or 1 x n) array or coordinate file.
std::vector<double> read_matrix_market_vector(const std::filesystem::path& path);
// Writes x as an n x 1 real array (atomically: no partial file on failure).
void write_matrix_market_vector(const std::filesystem::path& path, std::span<const double> x,
                                std::string_view comment = {});
// The seed's benchmark matrix: 2-D Poisson, linear elements on an N x N grid of right triangles,
// i.e. the 5-point stencil (4 on the diagonal, -1 for each grid neighbour); n = N * N.
HostCsr<double> poisson_2d(std::size_t grid_size);
// y = A x on the host in double precision (for residual checks).
std::vector<double> multiply(const HostCsr<double>& a, std::span<const double> x);

// ---------------------------------------------------------------------------------------------
// Krylov solvers.
// ---------------------------------------------------------------------------------------------
// cg and bicgstab (Jacobi preconditioning too) and pipelined_cg (Ghysels & Vanroose: one
// grid-wide barrier per iteration) and pipelined_bicgstab (two): on a GPU the generated programs of
// linalg_program.hpp, one kernel per solve; the pipelined methods are unpreconditioned.
enum class Solver { cg, bicgstab, pipelined_cg, pipelined_bicgstab };
enum class Preconditioner { none, jacobi };  // jacobi: M = diag(A)^-1
enum class Precision { fp32, fp64 };         // of the matrix values, vectors and GPU iterations
// How the iterations run:
//   automatic: on a GPU, generated; on a CPU, one fused, vectorised, threaded loop per step of the
//     method (the expression generator's CPU backend).
//   generated: the method's program (linalg_program.hpp): on a GPU one generated kernel per solve
//     in the form run_program_on_gpu picks (BiCGStab: one-barrier BiCGStab in the tile form where
//     the matrix is a constant stencil whose tiles fit the GPU, else the 3-barrier program); on a
//     CPU the program's steps (run_program); on an OpenCL device its persistent kernel.
//   graph (cg, bicgstab): the generator's kernels of a batch of iterations replayed as one CUDA
//     graph per host check (GPU); the fused CPU loops (CPU).
// docs/linalg.md describes each.
enum class Launch { automatic, graph, generated };
// "auto", "graph", "generated" (the CLI's --launch and Python's launch=); nullopt for another.
std::optional<Launch> launch_from_string(std::string_view name);

struct SolverOptions {
  Solver solver = Solver::bicgstab;
  Preconditioner preconditioner = Preconditioner::none;
  Precision precision = Precision::fp64;
  double tolerance = 1e-8;  // stop when ||r|| / ||b|| <= tolerance
  int max_iterations = 1000;
  Launch launch = Launch::automatic;
  // Launch::graph: iterations per host check (the solve stops at the first check after
  // convergence; iterations after it are masked no-ops); 0 = 8 on a GPU, 1 on a CPU. A generated
  // kernel runs the whole solve.
  int batch = 0;
};

enum class SolverStatus {
  converged,
  max_iterations,
  breakdown_rho,
  breakdown_omega,
  breakdown_alpha,
  zero_rhs
};
std::string_view to_string(SolverStatus status);
std::string_view to_string(Solver solver);
std::string_view to_string(Launch launch);

struct SolverResult {
  std::vector<double> x;
  SolverStatus status = SolverStatus::max_iterations;
  int iterations = 0;
  double relative_residual = 0;          // ||r|| / ||b|| of the recurrence at the end
  std::vector<double> residual_history;  // ||r_k|| / ||b||, k = 0 .. iterations
  double seconds = 0;                    // iteration loop only (no set-up, no compilation)
  double seconds_per_iteration = 0;
  int kernels_per_iteration = 0;  // GPU launches per iteration (0 on the CPU; 1: one per solve)
  int host_checks = 0;            // host synchronisations in the loop
  std::string backend;            // e.g. "gpu:0 graph x8" or "cpu/avx2 (16 threads)"
};

// Solves A x = b from x = 0 (A square). Runs as one tile of the scheduler, so a failing GPU
// hands the solve to a CPU worker when the resources have one.
SolverResult solve(const Resources& resources, const HostCsr<double>& a, std::span<const double> b,
                   const SolverOptions& options);

}  // namespace molaccel::linalg
