// The planner of a whole program: the steps of the setup and of one iteration split into
// segments, each ending at a grid-wide barrier. Dialect-neutral: the host executor
// (program_host.cpp) and any code generator read the same plan.
//
// Rules (a step's statements read the values from before the step):
//   * A vector statement runs row by row; it reads scalars and vectors at its own row, and
//     vectors at other rows through prod(A, v).
//   * A reduction (inner_prod, norm_2 in a scalar statement) is contributed row by row at its
//     step (per-block partial sums); its total is known only after the next barrier. A scalar
//     statement holding a reduction, reading a scalar not yet known, or writing or reading a
//     scalar that such a deferred statement reads or writes, is deferred: evaluated after the
//     barrier that closes its segment (every block sums the partials: cuda/program_blocks.cuh). Other scalar
//     statements run in place (every thread computes the same value).
//   * A barrier closes the segment before a step that reads a deferred scalar in a row-wise
//     expression, or reads through a product a vector written earlier in the segment.
//   * A vector read through a product and written later in the same segment (or by the same
//     step) is renamed: written to a second buffer, read from it at its own row after the
//     write, and the two buffers swap at the barrier.
//   * The end of the setup and the end of every iteration are barriers; the stop tests and
//     monitors run after them, so they read only known scalars.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "molaccel/linalg_program.hpp"

namespace molaccel::linalg::program {

struct PlannedReduction {
  NodePtr node;  // inner_product or norm_2 (its operands are row-wise vector expressions)
  int step = 0;  // where it is contributed
};

struct SegmentItem {
  int step = 0;                                  // index into the phase's steps
  bool scalars_in_place = true;                  // false: the step's scalar statements are deferred
  std::vector<int> reductions;                   // slots contributed by this step
  std::map<const ExpressionNode*, int> slot_of;  // the step's reduction nodes -> slots
};

struct Segment {
  std::vector<SegmentItem> body;  // in program order
  std::set<int> renamed;          // vectors (symbol indices) double-buffered in this segment
  std::vector<int> deferred;      // steps whose scalar statements run after the closing barrier
  std::vector<int> reductions;    // slots whose totals the barrier produces
};

struct Phase {
  std::vector<Segment> segments;             // each ends with a barrier
  std::vector<PlannedReduction> reductions;  // index = slot
};

struct ProgramPlan {
  Phase setup, iteration;
  int barriers_per_iteration() const { return static_cast<int>(iteration.segments.size()); }
};

ProgramPlan plan_program(const Program& program);
// One line per segment, for tests and docs: "[q=.. | alpha*] [..]"
std::string describe(const Program& program, const ProgramPlan& plan);

// run_program_on_host with a given plan (tests break plans on purpose).
ProgramResult run_planned_on_host(const Program& program, const ProgramPlan& plan,
                                  const ProgramInputs& inputs);

// Helpers shared with the executors.
// The rows of a run (the matrix's, else the vectors'), after checking the inputs against the
// program's symbols (a square matrix where the program has one, vectors of one length, names of
// the right kind); throws Error naming the program.
std::size_t checked_rows(const Program& program, const ProgramInputs& inputs);
// The inputs with the vectors the program derives from the matrix (Program::transposed_product,
// Program::inverse_diagonal) that they do not give computed on the host into `storage`; `inputs`
// itself where there are none to add.
const ProgramInputs& with_derived_inputs(const Program& program, const ProgramInputs& inputs,
                                         ProgramInputs& storage);
bool is_reduction(const NodePtr& n);
// Whether some product's operand holds a product (Program allows one level).
bool nests_products(const Program& program);
void visit(const NodePtr& n, const std::function<void(const NodePtr&)>& f);

}  // namespace molaccel::linalg::program
