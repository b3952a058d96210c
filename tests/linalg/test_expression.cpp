// Tier 1: expression trees, kernel names, planning rules, modifiers and the reference on
// cases checked by hand.
#include <gtest/gtest.h>

#include "linalg/expression_util.hpp"
#include "linalg/plan.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::linalg {
namespace {

TEST(LinalgExpression, PaperKernelName) {
  SymbolicVector<double, 0> x;
  SymbolicVector<double, 1> y;
  SymbolicVector<double, 2> z;
  CustomOperation op(x = y + z);
  EXPECT_EQ(op.name(), "vec0_eq_vec1_plus_vec2");
  EXPECT_EQ(op.kernels_per_run(), 1);
  EXPECT_NE(op.cuda_source().find("__global__ void __launch_bounds__(256) vec0_eq_vec1_plus_vec2("),
            std::string::npos);
}

TEST(LinalgExpression, ShapeAndTypeErrors) {
  SymbolicVector<double, 0> x;
  SymbolicVector<double, 1> y;
  SymbolicVector<float, 2> f;
  SymbolicMatrix<double, 3> a;
  EXPECT_THROW((void)(x * y), Error);  // ambiguous: element_prod or inner_prod
  EXPECT_THROW((void)(x / y), Error);
  EXPECT_THROW((void)(x + f), Error);  // mixed precision
  EXPECT_THROW((void)(a + x), Error);  // matrix arithmetic
  EXPECT_THROW((void)prod(x, y), Error);
  GpuSymbolicScalar<double, 4> s;
  EXPECT_THROW((void)(s = x), Error);                                     // vector into scalar
  EXPECT_THROW(CustomOperation(x = y, x = y + y), Error);                 // assigned twice
  EXPECT_THROW(CustomOperation(s = inner_prod(x, x), x = s * y), Error);  // scalar written and read
  SymbolicVector<double, 5> gap;
  EXPECT_THROW(CustomOperation(x = gap), Error);  // operand numbers 1..4 unused
}

TEST(LinalgExpression, ExpansionIntoTokens) {
  // x = y - alpha*(prod(A, y) - z) -> tokens + y - alpha*prod(A, y) + alpha*z, and no temporary.
  SymbolicVector<double, 0> x;
  SymbolicCsrMatrix<double, 1> a;
  SymbolicVector<double, 2> y;
  SymbolicVector<double, 3> z;
  CpuSymbolicScalar<double, 4> alpha;
  CustomOperation op(x = y - alpha * (prod(a, y) - z));
  const auto& plan = op.plan();
  EXPECT_TRUE(plan.temporaries.empty());
  ASSERT_EQ(plan.stages.size(), 1u);
  const auto tokens = tokens_of(plan.stages[0].vector_assignments[0].value);
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_FALSE(tokens[0].negative);
  EXPECT_EQ(infix(tokens[0].term), "vec2");
  EXPECT_TRUE(tokens[1].negative);
  EXPECT_EQ(infix(tokens[1].term), "scal4 * prod(csr1, vec2)");
  EXPECT_FALSE(tokens[2].negative);  // - alpha * (-z) -> + alpha * z
  EXPECT_EQ(infix(tokens[2].term), "scal4 * vec3");
}

TEST(LinalgExpression, InnerProductsRunFirstAndAreFusedIntoTheConsumer) {
  // x = prod(A, inner_prod(y, y + z) * y + z): two kernels (the paper's BLAS-2 example).
  SymbolicVector<double, 0> x;
  SymbolicMatrix<double, 1> a;
  SymbolicVector<double, 2> y;
  SymbolicVector<double, 3> z;
  CustomOperation op(x = prod(a, inner_prod(y, y + z) * y + z));
  ASSERT_EQ(op.kernels_per_run(), 2);
  EXPECT_EQ(op.plan().stages[0].what, PlanStage::Kind::reduction);
  EXPECT_EQ(op.plan().stages[1].consumed, std::vector<int>{0});
  EXPECT_NE(op.cuda_source().find("sum_partials(partials + 0 * partial_stride"), std::string::npos);
  // Nested inner products need one more level.
  SymbolicVector<double, 1> u;
  SymbolicVector<double, 2> w;
  CustomOperation nested(x = inner_prod(u, inner_prod(u, w) * u + w) * w);
  EXPECT_EQ(nested.kernels_per_run(), 3);
  // A shared inner product is computed once.
  CustomOperation shared(x = inner_prod(u, w) * u + inner_prod(u, w) * w);
  EXPECT_EQ(shared.plan().reductions.size(), 1u);
}

TEST(LinalgExpression, TemporaryOnlyWhenAProductReadsAWrittenVector) {
  SymbolicVector<double, 0> x;
  SymbolicCsrMatrix<double, 1> a;
  SymbolicVector<double, 2> y;
  CustomOperation direct(x = prod(a, y));
  EXPECT_TRUE(direct.plan().temporaries.empty());
  CustomOperation self(x = prod(a, x));
  EXPECT_EQ(self.plan().temporaries.size(), 1u);
  EXPECT_EQ(self.kernels_per_run(), 2);
  // The outer product's operand reads the inner temporary at other rows: a stage after it.
  CustomOperation nested(x = prod(a, prod(a, x) - 0.5 * x));
  EXPECT_EQ(nested.plan().temporaries.size(), 2u);
  EXPECT_EQ(nested.kernels_per_run(), 3);
}

TEST(LinalgExpression, ModifierParser) {
  ElementwiseModifier f("F", "1/(1+X)");
  SymbolicVector<double, 0> x;
  SymbolicVector<double, 1> y;
  EXPECT_EQ(f(y).to_string(), "F(vec1)");
  ElementwiseModifier g("relu", " max(X, 0) * 2e0 - -1.5 ");
  EXPECT_THROW(ElementwiseModifier("H", "1/(1+"), InputError);
  EXPECT_THROW(ElementwiseModifier("H", "foo(X)"), InputError);
  EXPECT_THROW(ElementwiseModifier("H", "X $ 2"), InputError);
  EXPECT_THROW(ElementwiseModifier("1bad", "X"), InputError);
  try {
    ElementwiseModifier("H", "X + )");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("column 5"), std::string::npos) << e.what();
  }
  // Values by hand through the reference: F(G(2)) = 1/(1+4).
  MOLACCEL_EW_MODIFIER(G, "X*X");
  std::vector<ReferenceOperand> ops(2);
  ops[0].values = {0.0};
  ops[1].values = {2.0};
  reference_execute({x = f(G(y))}, ops);
  EXPECT_DOUBLE_EQ(ops[0].values[0], 0.2);
}

TEST(LinalgExpression, ReferenceByHand) {
  SymbolicVector<double, 0> x;
  SymbolicVector<double, 1> y;
  std::vector<ReferenceOperand> ops(2);
  ops[0].values = {1, 2};
  ops[1].values = {10, 20};
  // Plane rotation: both right-hand sides see the old x.
  reference_execute({x = x + y, y = -x + y}, ops);
  EXPECT_EQ(ops[0].values, (std::vector<double>{11, 22}));
  EXPECT_EQ(ops[1].values, (std::vector<double>{9, 18}));
  reference_execute({x = inner_prod(x, y) * y}, ops);  // (11*9 + 22*18) = 495
  EXPECT_EQ(ops[0].values, (std::vector<double>{495 * 9.0, 495 * 18.0}));
}

}  // namespace
}  // namespace molaccel::linalg
