// molaccel linalg: a run-time generator of fused linear-algebra kernels (after ViennaCL's
// generator, Tillet, Rupp & Selberherr) and the Krylov solvers built from it.
//
//   using namespace molaccel::linalg;
//   symbolic_vector<double, 0> sx;  symbolic_vector<double, 1> sy;  symbolic_vector<double, 2> sz;
//   custom_operation add(sx = sy + sz);           // kernel "vec0_eq_vec1_plus_vec2"
//   add(x, y, z);                                  // x, y, z: linalg::vector<double>
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
enum class value_type : std::uint8_t { f32, f64, i32 };
std::string_view to_string(value_type type);
std::size_t size_of(value_type type);

template <class T>
constexpr value_type value_type_of() {
  if constexpr (std::is_same_v<T, float>)
    return value_type::f32;
  else if constexpr (std::is_same_v<T, double>)
    return value_type::f64;
  else {
    static_assert(std::is_same_v<T, std::int32_t>, "linalg supports float, double (and int32 indices)");
    return value_type::i32;
  }
}

// Where a container's memory lives: GPU `device` (>= 0) or host memory (-1). Host containers
// remember how many threads the CPU backend may use on them (0 = all cores).
struct placement {
  int device = -1;
  int cpu_threads = 0;
  bool on_gpu() const { return device >= 0; }
  bool operator==(const placement& o) const { return device == o.device; }
  std::string describe() const;
};
// The first GPU of `resources`, or the host when it uses no GPU.
placement placement_of(const Resources& resources);

namespace detail {
struct storage;  // host or device bytes (src/linalg/containers.cpp)

// Untyped array: the one owner of memory behind every container. Views (a vector element used
// as a scalar) share the storage with an offset.
class array {
 public:
  array() = default;
  array(const placement& where, value_type type, std::size_t count);  // zero-filled
  std::size_t size() const { return count_; }
  value_type type() const { return type_; }
  const placement& where() const;
  void* data() const;  // device or host address of element 0
  void upload(const void* host, std::size_t count, std::size_t first = 0);
  void download(void* host, std::size_t count, std::size_t first = 0) const;  // synchronises
  array view(std::size_t first, std::size_t count) const;
  bool empty_handle() const { return !storage_; }

 private:
  std::shared_ptr<storage> storage_;
  std::size_t offset_ = 0, count_ = 0;
  value_type type_ = value_type::f64;
};
}  // namespace detail

template <class T>
class scalar;

// A dense vector of n elements of T.
template <class T>
class vector {
 public:
  vector() = default;
  vector(const Resources& resources, std::size_t n) : vector(placement_of(resources), n) {}
  vector(const placement& where, std::size_t n) : data_(where, value_type_of<T>(), n) {}
  vector(const Resources& resources, std::span<const T> values) : vector(resources, values.size()) {
    copy_from_host(values);
  }
  std::size_t size() const { return data_.size(); }
  const placement& where() const { return data_.where(); }
  void copy_from_host(std::span<const T> values) {
    MOLACCEL_EXPECTS(values.size() == size(), "vector::copy_from_host: size mismatch");
    data_.upload(values.data(), values.size());
  }
  std::vector<T> to_host() const {
    std::vector<T> out(size());
    data_.download(out.data(), out.size());
    return out;
  }
  // Element i as a device scalar (shares memory): lets solvers keep per-iteration scalars in
  // one array that is copied to the host once per batch of iterations.
  scalar<T> element(std::size_t i) const;
  const detail::array& raw() const { return data_; }

 private:
  detail::array data_;
};

// A scalar: either a host value (passed to kernels by value) or a value in device memory
// (passed by address, so it can be produced and consumed on the GPU without a host round trip).
template <class T>
class scalar {
 public:
  scalar(T host_value = T(0)) : host_value_(host_value) {}  // host value
  scalar(const Resources& resources, T value) : scalar(placement_of(resources), value) {}
  scalar(const placement& where, T value) : data_(where, value_type_of<T>(), 1) { set(value); }
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
  const detail::array& raw() const { return data_; }
  static scalar view(const detail::array& a) {
    scalar s;
    s.data_ = a;
    return s;
  }

 private:
  T host_value_ = T(0);
  detail::array data_;
};

template <class T>
scalar<T> vector<T>::element(std::size_t i) const {
  MOLACCEL_EXPECTS(i < size(), "vector::element: index out of range");
  return scalar<T>::view(data_.view(i, 1));
}

// Dense row-major matrix whose rows are padded to a multiple of 32 elements (aligned,
// coalesced row access on the GPU and whole SIMD vectors on the CPU).
template <class T>
class matrix {
 public:
  matrix() = default;
  matrix(const Resources& resources, std::size_t rows, std::size_t cols)
      : matrix(placement_of(resources), rows, cols) {}
  matrix(const placement& where, std::size_t rows, std::size_t cols)
      : rows_(rows), cols_(cols), ld_(padded(cols)), data_(where, value_type_of<T>(), rows * padded(cols)) {}
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  std::size_t leading_dimension() const { return ld_; }
  const placement& where() const { return data_.where(); }
  // `values` is row-major rows x cols (unpadded).
  void copy_from_host(std::span<const T> values) {
    MOLACCEL_EXPECTS(values.size() == rows_ * cols_, "matrix::copy_from_host: size mismatch");
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
  const detail::array& raw() const { return data_; }
  static std::size_t padded(std::size_t cols) { return (cols + 31) / 32 * 32; }

 private:
  std::size_t rows_ = 0, cols_ = 0, ld_ = 0;
  detail::array data_;
};

// Compressed sparse rows on the host: the exchange format of the I/O functions.
template <class T>
struct host_csr {
  std::size_t rows = 0, cols = 0;
  std::vector<std::int32_t> row_ptr{0};  // rows + 1 entries
  std::vector<std::int32_t> col_idx;     // sorted within each row, no duplicates
  std::vector<T> values;
  std::size_t nnz() const { return values.size(); }
};

// Sparse matrix (CSR, 32-bit indices) in device or host memory.
template <class T>
class csr_matrix {
 public:
  csr_matrix() = default;
  template <class U>
  csr_matrix(const Resources& resources, const host_csr<U>& a) : csr_matrix(placement_of(resources), a) {}
  template <class U>
  csr_matrix(const placement& where, const host_csr<U>& a)
      : rows_(a.rows),
        cols_(a.cols),
        row_ptr_(where, value_type::i32, a.row_ptr.size()),
        col_idx_(where, value_type::i32, a.col_idx.size()),
        values_(where, value_type_of<T>(), a.values.size()) {
    MOLACCEL_EXPECTS(a.row_ptr.size() == a.rows + 1 && a.col_idx.size() == a.values.size(),
                     "csr_matrix: inconsistent host_csr");
    std::vector<T> converted(a.values.begin(), a.values.end());
    row_ptr_.upload(a.row_ptr.data(), a.row_ptr.size());
    col_idx_.upload(a.col_idx.data(), a.col_idx.size());
    values_.upload(converted.data(), converted.size());
  }
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  std::size_t nnz() const { return values_.size(); }
  const placement& where() const { return values_.where(); }
  const detail::array& row_ptr() const { return row_ptr_; }
  const detail::array& col_idx() const { return col_idx_; }
  const detail::array& values() const { return values_; }

 private:
  std::size_t rows_ = 0, cols_ = 0;
  detail::array row_ptr_, col_idx_, values_;
};

// ---------------------------------------------------------------------------------------------
// Symbolic expressions. An expression is an immutable tree; leaves are numbered operands that
// are bound to containers when the operation runs (the paper's symbolic_vector<T, i>).
// ---------------------------------------------------------------------------------------------
enum class node_kind : std::uint8_t {
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
enum class shape : std::uint8_t { scalar, vector, matrix };

struct expression_node {
  node_kind kind = node_kind::constant;
  value_type type = value_type::f64;
  linalg::shape shape = linalg::shape::scalar;
  int index = -1;       // operand number for leaves
  double constant = 0;  // node_kind::constant
  std::string name;     // function / modifier name
  std::vector<std::shared_ptr<const expression_node>> children;
};
using node_ptr = std::shared_ptr<const expression_node>;

class statement;

class expression {
 public:
  explicit expression(node_ptr node) : node_(std::move(node)) {}
  const node_ptr& node() const { return node_; }
  std::string to_string() const;  // infix form, e.g. "vec1 + 2 * vec2"

 private:
  node_ptr node_;
};

enum class assign_op : std::uint8_t { assign, add_assign, subtract_assign };

class statement {
 public:
  statement(node_ptr target, assign_op op, node_ptr value);
  const node_ptr& target() const { return target_; }
  assign_op op() const { return op_; }
  const node_ptr& value() const { return value_; }

 private:
  node_ptr target_;
  assign_op op_;
  node_ptr value_;
};

namespace detail {
node_ptr leaf(node_kind kind, value_type type, int index);
}

// An assignable symbolic operand (vector, dense matrix or device scalar): `sx = expr` makes a
// statement.
class assignable : public expression {
 public:
  using expression::expression;
  statement operator=(const expression& value) const { return {node(), assign_op::assign, value.node()}; }
  statement operator=(const assignable& value) const { return {node(), assign_op::assign, value.node()}; }
  statement operator+=(const expression& value) const {
    return {node(), assign_op::add_assign, value.node()};
  }
  statement operator-=(const expression& value) const {
    return {node(), assign_op::subtract_assign, value.node()};
  }
};

template <class T, int I>
struct symbolic_vector : assignable {
  symbolic_vector() : assignable(detail::leaf(node_kind::vector, value_type_of<T>(), I)) {}
  using assignable::operator=;
  statement operator=(const symbolic_vector& value) const {
    return {node(), assign_op::assign, value.node()};
  }
};
// A dense matrix: the first argument of prod(), an operand of element-wise expressions over
// matrices of the same shape and scalars, and an assignment target (`A = alpha * B + C`,
// `A += element_prod(B, C)`, `A = exp(B)`; every matrix of such an operation has the target's
// rows and columns, checked at run time).
template <class T, int I>
struct symbolic_matrix : assignable {
  symbolic_matrix() : assignable(detail::leaf(node_kind::dense_matrix, value_type_of<T>(), I)) {}
  using assignable::operator=;
  statement operator=(const symbolic_matrix& value) const {
    return {node(), assign_op::assign, value.node()};
  }
};
template <class T, int I>
struct symbolic_csr_matrix : expression {
  symbolic_csr_matrix() : expression(detail::leaf(node_kind::csr_matrix, value_type_of<T>(), I)) {}
};
// A scalar passed by value from the host (a T, or a host scalar<T>).
template <class T, int I>
struct cpu_symbolic_scalar : expression {
  cpu_symbolic_scalar() : expression(detail::leaf(node_kind::host_scalar, value_type_of<T>(), I)) {}
};
// A scalar in device memory (scalar<T> created with Resources); may be assigned to.
template <class T, int I>
struct gpu_symbolic_scalar : assignable {
  gpu_symbolic_scalar() : assignable(detail::leaf(node_kind::device_scalar, value_type_of<T>(), I)) {}
  using assignable::operator=;
  statement operator=(const gpu_symbolic_scalar& value) const {
    return {node(), assign_op::assign, value.node()};
  }
};

// Arithmetic. Scalars broadcast over vectors; vector * vector is an error (use element_prod).
expression operator+(const expression& a, const expression& b);
expression operator-(const expression& a, const expression& b);
expression operator*(const expression& a, const expression& b);
expression operator/(const expression& a, const expression& b);
expression operator-(const expression& a);
expression operator+(const expression& a, double b);
expression operator+(double a, const expression& b);
expression operator-(const expression& a, double b);
expression operator-(double a, const expression& b);
expression operator*(const expression& a, double b);
expression operator*(double a, const expression& b);
expression operator/(const expression& a, double b);
expression operator/(double a, const expression& b);
expression element_prod(const expression& a, const expression& b);
expression element_div(const expression& a, const expression& b);
expression exp(const expression& a);
expression log(const expression& a);
expression sqrt(const expression& a);
expression abs(const expression& a);
expression sin(const expression& a);
expression cos(const expression& a);
expression tanh(const expression& a);
expression nonzero(const expression& a);  // 1 where a != 0, else 0
expression max(const expression& a, const expression& b);
expression min(const expression& a, const expression& b);
expression pow(const expression& a, const expression& b);
expression safe_div(const expression& a, const expression& b);  // a / b, or 0 where b == 0
expression greater(const expression& a, const expression& b);   // 1 where a > b, else 0
expression inner_prod(const expression& a, const expression& b);
expression norm_2(const expression& a);
expression prod(const expression& matrix, const expression& vector);

// An element-wise modifier from an expression in X (the paper's VIENNACL_EW_MODIFIER):
// numbers, X, + - * /, parentheses and the functions above, e.g. "1/(1+X)" or "max(X, 0)".
class elementwise_modifier {
 public:
  elementwise_modifier(std::string name, std::string body);  // throws InputError on bad text
  expression operator()(const expression& argument) const;
  const std::string& name() const { return name_; }
  const std::string& body() const { return body_; }

 private:
  std::string name_, body_;
};
#define MOLACCEL_EW_MODIFIER(NAME, BODY) const ::molaccel::linalg::elementwise_modifier NAME(#NAME, BODY)

// ---------------------------------------------------------------------------------------------
// custom_operation: one or several simultaneous statements compiled into fused kernels.
// ---------------------------------------------------------------------------------------------
// A run-time operand of an operation, converted implicitly from the containers.
struct argument {
  enum class kind : std::uint8_t { vector, dense_matrix, csr_matrix, host_value, device_scalar };
  kind what = kind::host_value;
  value_type type = value_type::f64;
  double host_value = 0;
  const detail::array* data = nullptr;  // vector / scalar storage, matrix values
  const detail::array* row_ptr = nullptr;
  const detail::array* col_idx = nullptr;
  std::size_t rows = 0, cols = 0, ld = 0;

  argument(float v) : what(kind::host_value), type(value_type::f32), host_value(v) {}
  argument(double v) : what(kind::host_value), type(value_type::f64), host_value(v) {}
  template <class T>
  argument(const vector<T>& v)
      : what(kind::vector), type(value_type_of<T>()), data(&v.raw()), rows(v.size()), cols(1) {}
  template <class T>
  argument(const scalar<T>& s)
      : what(s.on_host() ? kind::host_value : kind::device_scalar),
        type(value_type_of<T>()),
        host_value(s.on_host() ? double(s.value()) : 0.0),
        data(s.on_host() ? nullptr : &s.raw()) {}
  template <class T>
  argument(const matrix<T>& m)
      : what(kind::dense_matrix),
        type(value_type_of<T>()),
        data(&m.raw()),
        rows(m.rows()),
        cols(m.cols()),
        ld(m.leading_dimension()) {}
  template <class T>
  argument(const csr_matrix<T>& m)
      : what(kind::csr_matrix),
        type(value_type_of<T>()),
        data(&m.values()),
        row_ptr(&m.row_ptr()),
        col_idx(&m.col_idx()),
        rows(m.rows()),
        cols(m.cols()) {}
};

struct operation_plan;  // analysed statements (src/linalg/plan.hpp)

class custom_operation {
 public:
  explicit custom_operation(statement s) : custom_operation(std::vector<statement>{std::move(s)}) {}
  // Several statements with simultaneous semantics: every right-hand side sees the values from
  // before the operation (the plane rotation `sx = sx + sy, sy = -sx + sy` uses the old x).
  template <class... More>
  custom_operation(statement first, statement second, More... more)
      : custom_operation(std::vector<statement>{std::move(first), std::move(second), std::move(more)...}) {}
  explicit custom_operation(std::vector<statement> statements);
  ~custom_operation();
  custom_operation(custom_operation&&) noexcept;
  custom_operation& operator=(custom_operation&&) noexcept;

  // Runs on the operands' device (all operands must share it); asynchronous on a GPU (ordered
  // with every other linalg operation on that device; to_host() synchronises).
  template <class... Args>
  void operator()(const Args&... args) {
    run({argument(args)...});
  }
  void run(const std::vector<argument>& args);

  const std::string& name() const;  // e.g. "vec0_eq_vec1_plus_vec2"
  std::string cuda_source() const;  // the generated CUDA translation unit
  std::vector<std::string> kernel_names() const;
  int kernels_per_run() const;           // launches per run on a GPU
  std::string last_cpu_variant() const;  // "avx2" etc: which CPU build ran last
  const operation_plan& plan() const;

 private:
  std::unique_ptr<operation_plan> plan_;
  struct state;
  std::shared_ptr<state> state_;
};

// The plain loop-per-operation oracle: evaluates the statements on host doubles, one loop per
// tree node. Operands: vectors/scalars as `values` (scalars one element), matrices dense
// row-major (rows x cols) or CSR. Used by the tests; shares no code with the fast paths.
struct reference_operand {
  std::vector<double> values;
  std::size_t rows = 0, cols = 0;
  const host_csr<double>* csr = nullptr;
};
void reference_execute(const std::vector<statement>& statements, std::vector<reference_operand>& operands);

// ---------------------------------------------------------------------------------------------
// Matrix Market I/O and test systems.
// ---------------------------------------------------------------------------------------------
// Reads a coordinate or array file (real, integer or pattern; general or symmetric) into CSR
// (symmetric entries mirrored, duplicates summed). Errors: InputError with the line number.
host_csr<double> read_matrix_market(const std::filesystem::path& path);
host_csr<double> parse_matrix_market(std::string_view name, std::string_view content);
// A vector: an n x 1 (or 1 x n) array or coordinate file.
std::vector<double> read_matrix_market_vector(const std::filesystem::path& path);
// Writes x as an n x 1 real array (atomically: no partial file on failure).
void write_matrix_market_vector(const std::filesystem::path& path, std::span<const double> x,
                                std::string_view comment = {});
// The seed's benchmark matrix: 2-D Poisson, linear elements on an N x N grid of right triangles,
// i.e. the 5-point stencil (4 on the diagonal, -1 for each grid neighbour); n = N * N.
host_csr<double> poisson_2d(std::size_t grid_size);
// y = A x on the host in double precision (for residual checks).
std::vector<double> multiply(const host_csr<double>& a, std::span<const double> x);

// ---------------------------------------------------------------------------------------------
// Krylov solvers.
// ---------------------------------------------------------------------------------------------
enum class solver_kind { cg, bicgstab };
enum class preconditioner { none, jacobi };
enum class precision { fp32, fp64 };
// stream: one launch per generated kernel, host check every iteration. graph: a CUDA graph of
// `batch` iterations replayed per host check (no launch overhead); the iterations after
// convergence in a batch are masked no-ops. persistent: the batch as one generated kernel
// (cooperative launch, one block per SM, grid-wide barriers between the stages): one launch per
// batch. resident: a hand-written cooperative kernel keeps each thread's rows (vectors and short
// matrix rows) in registers across iterations and runs the whole solve (or `batch` iterations
// per host check) in one launch; for systems that fit the GPU's threads (a few hundred thousand
// rows). automatic: resident on a GPU up to resident_automatic_rows rows, else fused for
// BiCGStab and graph for CG (falling back to graph when the fused grid cannot run).
// fused: the resident kernel's two-barrier BiCGStab as a streaming cooperative kernel
// for any n (vectors in global memory, grid-stride over rows, two grid barriers per iteration;
// CG in Chronopoulos-Gear form, one), `batch` iterations per launch; docs/linalg.md.
enum class launch_mode { automatic, stream, graph, persistent, resident, fused };

struct solver_options {
  solver_kind solver = solver_kind::bicgstab;
  preconditioner precond = preconditioner::none;
  linalg::precision precision = linalg::precision::fp64;
  double tolerance = 1e-8;  // stop when ||r|| / ||b|| <= tolerance
  int max_iterations = 1000;
  launch_mode launch = launch_mode::automatic;
  int batch = 0;  // iterations per host check; 0 = automatic
  // BiCGStab: evaluate each matrix product inside the inner-product pass and again in its
  // consumer (6 kernels per iteration instead of 8, more bytes; for latency-bound sizes):
  // -1 automatic (currently never), 0 never, 1 always.
  int products_in_reductions = -1;
  // Persistent launch geometry: blocks of the cooperative grid (0 = one per SM) and threads per
  // block (0 = 256; 256, 512 or 1024). One block needs no grid barrier (stages are separated by
  // __syncthreads); measured on an H100 it is still not faster than the graph mode (docs/linalg.md).
  int persistent_blocks = 0;
  int persistent_threads = 0;
  // Resident launch geometry: blocks (0 = from n: one block, one cluster or a cooperative grid
  // with 1, 2 or 4 rows per thread), threads per block (0 = 512; 128, 256 or 512) and the barrier
  // (0 automatic: one block up to 4 x threads rows, one cluster of <= 16 blocks up to 32 x threads,
  // else a grid; 1 cluster with distributed shared memory; 2 grid, flag barrier (each block
  // publishes an epoch, no atomics); 3 grid, cooperative groups' grid.sync(); 4 grid, one arrival
  // counter; 5 grid, the arrival counter incremented by a non-returning red.release; 6 grid, the
  // arrival counter, the last arrival publishing a generation word that the other blocks poll;
  // 7 grid, the arrival counter whose last arrival leaves without polling).
  int resident_blocks = 0;
  int resident_threads = 0;
  int resident_barrier = 0;
  // Resident BiCGStab: 0 automatic (2 in one block, 3 in a cluster, 4 on a grid, else 2), 1 four
  // barriers per iteration, 2 two (every vector also published, p and v double-buffered, the other
  // blocks' entries a product needs recomputed from the previous phase's vectors; docs/linalg.md),
  // 3 three, in one block or one cluster only ((r0, A M p) summed as (M A^T r0, p) with (r, r),
  // so the product needs no barrier of its own; MOLACCEL_LINALG_RESIDENT_CLUSTER_FORM=1|2|3
  // overrides the automatic form in a cluster), 4 one, on a grid, for matrices stored by
  // diagonals (the automatic choice on a grid where the band's halo windows fit shared memory:
  // (M A^T r0, p') is expanded into four more sums beside the four of omega, so one barrier gives
  // omega, beta and the next alpha; each block recomputes its neighbours' entries two hops deep;
  // MOLACCEL_LINALG_RESIDENT_GRID_FORM=2|4 overrides the automatic form on a grid).
  int resident_form = 0;
  // Resident BiCGStab in the one-barrier form, the blocks' rows: 0 automatic (2 where the matrix
  // is a stencil on a 2-D grid, else 1), 1 bands of consecutive rows (halo: the band's reach,
  // whole grid rows for a grid), 2 rectangular tiles of the grid (halo: a few cells around each
  // tile; fewer rows recomputed per block, docs/linalg.md). MOLACCEL_LINALG_RESIDENT_TILES=1|2
  // overrides automatic, =IxJ asks for I x J tiles.
  int resident_tiles = 0;
  // Resident grid with 4 rows per thread: keep the matrix rows of <= 5 nonzeros in shared memory
  // (loaded once per launch) instead of reading them from L2 in every product: 0 automatic
  // (yes), 1 no, 2 yes.
  int resident_matrix_shared = 0;
  // Resident and fused modes, sums across blocks after the barrier: 0 automatic (currently 2),
  // 1 every warp of every block reads all block sums, 2 warp 0 of each block reads them and shares
  // the totals through shared memory (bit-identical totals; 16x fewer reads of the same L2 lines).
  int resident_gather = 0;
  // Fused launch geometry: blocks of the cooperative grid (0 = as many as are co-resident, at
  // most one thread per row) and threads per block (0 = 512; 128, 256 or 512). Its grid barrier
  // is resident_barrier's (0 or 4 the arrival counter, 2 flags, 3 cooperative groups, 5 red counter).
  int fused_blocks = 0;
  int fused_threads = 0;
  // Registers of the fused kernel bounded for 1 (128 registers) or 2 (64) blocks of 512 threads
  // per SM; 0 = 2. The automatic grid is then that many blocks per SM (at 512 threads).
  int fused_blocks_per_sm = 0;
  // Fused BiCGStab kernel (measured in docs/linalg.md): the loads of the vectors that other blocks
  // wrote, 0 automatic (L1 up to 2,000,000 rows, L2 above), 1 through L2 only, 2 cached in L1 too;
  // the rows of each thread, 0 automatic (grid-stride), 1 grid-stride, 2 balanced (the last
  // partial pass split evenly over the blocks). The environment variables
  // MOLACCEL_LINALG_FUSED_LOADS / _ROWS (1 or 2) override automatic.
  int fused_loads = 0;
  int fused_rows = 0;
  // Fused BiCGStab kernel, storage of the matrix: 0 automatic (= 2), 1 CSR, 2 by
  // diagonals when the matrix qualifies (at most 8 distinct offsets j - i, at most 1.3 x nnz
  // stored entries, rows sorted, no NaN; otherwise CSR): one value per row and diagonal, no
  // column indices or row pointers (fp64 Poisson: 40 instead of 64 B per row and product), the
  // same sums bit for bit (H100, Poisson: 84 vs 107 us per iteration at n = 1e6, 0.75 vs 1.01 ms
  // at 1e7). Grid-stride rows only (balanced rows keep CSR). The environment
  // variable MOLACCEL_LINALG_FUSED_MATRIX (1 or 2) overrides automatic. docs/linalg.md.
  int fused_matrix = 0;
  // Resident BiCGStab (two- and three-barrier forms: the automatic ones), storage of the matrix:
  // 0 automatic (= 2), 1 CSR, 2 by diagonals when the matrix qualifies (as fused_matrix) and, at
  // 1 / 2 rows per thread, its diagonals fit the 8 / 5 register slots: the rows' values in
  // registers (shared memory on grids of 4 rows per thread), no column indices, the entries'
  // addresses the row plus uniform offsets; the same sums bit for bit (H100, Poisson, per
  // iteration: 1e3 2.3 vs 2.5 us, 1e4 6.45 vs 6.87 us, 1e5 11.8 vs 12.6 us, 2e5 11.8 vs 16.1 us).
  // The four-barrier form and CG keep CSR. The environment variable
  // MOLACCEL_LINALG_RESIDENT_MATRIX (1 or 2) overrides automatic. docs/linalg.md.
  int resident_matrix = 0;
};
// launch_mode::automatic picks the resident mode on a GPU for systems of at most this many rows
// (measured faster than the graph mode at every size up to n = 199,809 on an H100: docs/linalg.md).
inline constexpr std::size_t resident_automatic_rows = 200000;

enum class solver_status {
  converged,
  max_iterations,
  breakdown_rho,
  breakdown_omega,
  breakdown_alpha,
  zero_rhs
};
std::string_view to_string(solver_status status);
std::string_view to_string(solver_kind kind);

struct solver_result {
  std::vector<double> x;
  solver_status status = solver_status::max_iterations;
  int iterations = 0;
  double relative_residual = 0;          // ||r|| / ||b|| of the recurrence at the end
  std::vector<double> residual_history;  // ||r_k|| / ||b||, k = 0 .. iterations
  double seconds = 0;                    // iteration loop only (no set-up, no compilation)
  double seconds_per_iteration = 0;
  int kernels_per_iteration = 0;  // GPU launches per iteration (0 on the CPU)
  int host_checks = 0;            // host synchronisations in the loop
  std::string backend;            // e.g. "gpu:0 graph x8" or "cpu/avx2 (16 threads)"
};

// Solves A x = b from x = 0 (A square). Runs as one tile of the scheduler, so a failing GPU
// hands the solve to a CPU worker when the resources have one.
solver_result solve(const Resources& resources, const host_csr<double>& a, std::span<const double> b,
                    const solver_options& options);

}  // namespace molaccel::linalg
