// molaccel linalg programs: an iterative method written once as a sequence of steps over named
// vectors, scalars and one sparse matrix, planned for a whole iteration (src/linalg/program/).
//
//   Program p("cg");
//   auto x = p.vector("x"), r = p.vector("r"), b = p.vector("b");
//   auto a = p.matrix("A");
//   auto rr = p.scalar("rr"), bound = p.scalar("bound");
//   p.setup(r = b).setup(rr = inner_prod(b, b));
//   p.step(...).step(...);                        // the loop body, in order
//   p.stop_when(1.0 - greater(rr, bound), "converged");
//
// Statements are those of CustomOperation (linalg.hpp). A step is one statement or a set of
// simultaneous statements (every right-hand side of the step sees the values from before it);
// steps run one after the other. The planner (program_plan) splits the steps into segments that
// end at a grid-wide barrier; docs/linalg.md ("Programs") gives the rules.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

class Program {
 public:
  struct Symbol {
    std::string name;
    NodeKind kind = NodeKind::vector;  // vector, device_scalar or csr_matrix
  };
  struct StopTest {
    Expression condition;  // a scalar expression of scalars; the loop stops when it is non-zero
    std::string status;
  };

  explicit Program(std::string name, ValueType type = ValueType::f64);

  // Symbols share one numbering (the operand index of their leaves): index = order of declaration.
  Assignable vector(const std::string& name);  // length n (the matrix's rows)
  Assignable scalar(const std::string& name);
  Expression matrix(const std::string& name);  // one square CSR matrix per program

  // Steps before the loop and the loop body. A scalar statement may hold inner products and
  // norms of vector expressions; a vector statement may hold prod(A, e) but no reductions
  // (assign them to a scalar first). A product's operand e may hold products itself, one level
  // deep (prod(A, r - alpha * prod(A, p))): read at other rows it recomputes the inner product
  // there, two hops of the matrix from the row, instead of waiting at a barrier for a vector
  // (in vector statements: an inner product or norm takes products of products not nested).
  Program& setup(Statement s) { return setup(std::vector<Statement>{std::move(s)}); }
  Program& setup(std::vector<Statement> simultaneous);
  Program& step(Statement s) { return step(std::vector<Statement>{std::move(s)}); }
  Program& step(std::vector<Statement> simultaneous);
  // Tested before every iteration (after the setup and after each iteration), in order of
  // declaration; the first whose condition is non-zero stops the loop with its status.
  Program& stop_when(Expression condition, std::string status);
  // A scalar expression recorded before every iteration (e.g. the relative residual).
  Program& monitor(Expression value);
  // Before the setup: target = A^T source, of source's input value (a vector symbol; zero where
  // the inputs do not give it). Every executor computes it on the host when it packs the inputs
  // (once per run, one pass over the matrix), unless the inputs give target themselves: a
  // product with the transpose is a scatter, which the row-wise steps cannot say. One-barrier
  // BiCGStab reads (A^T r0, p) = (r0, A p) to sum the next alpha's denominator early.
  Program& transposed_product(const Assignable& target, const Assignable& source);
  struct TransposedProduct {
    int target = -1, source = -1;  // vector symbols
  };
  const std::vector<TransposedProduct>& transposed_products() const { return transposed_; }
  // Before the setup: target = diag(A)^-1, 1 where a row has no diagonal entry or a zero one
  // (solve()'s Jacobi preconditioner M), computed on the host like a transposed product, unless
  // the inputs give target themselves.
  Program& inverse_diagonal(const Assignable& target);
  const std::vector<int>& inverse_diagonals() const { return inverse_diagonals_; }  // vector symbols

  const std::string& name() const { return name_; }
  ValueType type() const { return type_; }
  const std::vector<Symbol>& symbols() const { return symbols_; }
  int index_of(const std::string& name) const;  // throws when unknown
  const std::vector<std::vector<Statement>>& setup_steps() const { return setup_; }
  const std::vector<std::vector<Statement>>& loop_steps() const { return loop_; }
  const std::vector<StopTest>& stop_tests() const { return stops_; }
  const std::vector<Expression>& monitors() const { return monitors_; }

 private:
  NodePtr declare(const std::string& name, NodeKind kind);
  void check_step(const std::vector<Statement>& step) const;
  // The vector symbol `n` names in this program; throws `message` where it is none.
  int vector_symbol(const NodePtr& n, const char* message) const;

  std::string name_;
  ValueType type_;
  std::vector<Symbol> symbols_;
  std::vector<std::vector<Statement>> setup_, loop_;
  std::vector<StopTest> stops_;
  std::vector<Expression> monitors_;
  std::vector<TransposedProduct> transposed_;
  std::vector<int> inverse_diagonals_;
};

// Host data of one run: the matrix, the input vectors and scalars by name (the other vectors
// start at zero, the other scalars at zero).
struct ProgramInputs {
  const HostCsr<double>* matrix = nullptr;
  std::map<std::string, std::vector<double>> vectors;
  std::map<std::string, double> scalars;
  int max_iterations = 1000;
};

struct ProgramResult {
  std::string status = "iteration limit";  // a stop test's status, or "iteration limit"
  int iterations = 0;
  std::vector<std::vector<double>> monitor_history;  // per monitor: one value per test (iterations + 1)
  std::map<std::string, std::vector<double>> vectors;
  std::map<std::string, double> scalars;
  int barriers_per_iteration = 0;
  double seconds = 0;  // GPU: the kernel (setup and every iteration), from events
  int blocks = 0;      // GPU: blocks of the launch
  std::string kernel;  // GPU: the kernel's form (one block or a grid; rows in registers or streamed)
};

// Runs the planned segments on the host, row by row in order (each segment's statements for
// row 0, then row 1, ...), in double precision: a missing barrier or buffer in the plan shows up
// as a wrong result. The executor that tests the planner, not a fast path.
ProgramResult run_program_on_host(const Program& program, const ProgramInputs& inputs);

// The generated CUDA translation unit of the largest form: one persistent cooperative kernel
// that runs the setup and every iteration over rows streamed through memory
// (src/linalg/program/program_cuda.hpp lists its parameters and the other forms).
std::string program_cuda_source(const Program& program);
// Runs the program's generated kernel on GPU `device`, one launch: up to 2,048 rows one thread
// block (up to 512 threads, 1 to 4 rows each) with the rows in registers; above, a cooperative grid (256
// threads per block, every block resident) with each thread's rows (1, 2 or 4) in registers where they fit
// the resident threads, else streamed. A program with nested products on a constant stencil takes the tile
// form instead (a block per tile of the grid, or one block for the whole grid up to 2,048 rows; the operands
// over one and two hops around the tile in shared memory: docs/linalg.md). Computes in T = the program's
// type, scalars and sums in double. Throws where the build has no CUDA.
ProgramResult run_program_on_gpu(const Program& program, const ProgramInputs& inputs, int device = 0);

// Runs the program on the resources' first worker, as one tile of the scheduler (a GPU that
// fails hands it to a CPU worker where the resources have one): on a GPU the generated kernel
// above (run_program_on_gpu); on the CPU each step as one fused, vectorised, threaded loop of the
// expression generator (CustomOperation), the stop tests and monitors on the host. Computes in
// the program's type; results as run_program_on_host's (to rounding: sums run in another order).
ProgramResult run_program(const Resources& resources, const Program& program, const ProgramInputs& inputs);

// The methods written as programs (x0 = 0). Inputs: vector "b", scalar "bound" = (tolerance *
// ||b||)^2; result "x"; monitor 0 is sqrt(rr / (b, b)) with r the true recurrence residual.
// Preconditioner::jacobi (cg, bicgstab, one_barrier_bicgstab): M = diag(A)^-1 in the vector "d"
// (Program::inverse_diagonal), as solve() applies it: preconditioned CG (z = M r), BiCGStab
// preconditioned on the right (v = A M p, t = A M s, x += alpha M p + omega M s); the names
// gain a "jacobi_" prefix.
//   cg: 2 barriers per iteration (the search direction's product recomputes p at other rows);
//   bicgstab: 3 (the same for v = A p); pipelined_cg (Ghysels & Vanroose 2014): 1;
//   pipelined_bicgstab: 2 (BiCGStab with A r and A v carried by recurrences: a third product);
//   one_barrier_bicgstab: 1 (BiCGStab's iterates; s, p and the products recomputed two hops
//   deep at other rows, the next alpha from h = A^T r0; its stop test reads the residual of
//   the iteration before, so it runs one iteration more than bicgstab).
// Stop statuses: "converged", "breakdown (rho = 0)", "breakdown (omega = 0)",
// "breakdown ((p, Ap) = 0)" as for solve().
Program cg_program(ValueType type = ValueType::f64, Preconditioner preconditioner = Preconditioner::none);
Program bicgstab_program(ValueType type = ValueType::f64,
                         Preconditioner preconditioner = Preconditioner::none);
Program pipelined_cg_program(ValueType type = ValueType::f64);
Program pipelined_bicgstab_program(ValueType type = ValueType::f64);
Program one_barrier_bicgstab_program(ValueType type = ValueType::f64,
                                     Preconditioner preconditioner = Preconditioner::none);

}  // namespace molaccel::linalg
