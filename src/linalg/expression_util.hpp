// Internal helpers over expression trees shared by the planner, the backends and the reference.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

std::string infix(const NodePtr& n);                  // "vec1 + 2 * vec2"
std::string statement_to_string(const Statement& s);  // "vec0 = vec1 + vec2"
std::string name_of(const NodePtr& n);                // "vec1_plus_c2_times_vec2"
std::string kernel_base_name(const std::vector<Statement>& statements);
std::string structural_key(const NodePtr& n);  // equal for structurally equal trees
std::string leaf_name(const ExpressionNode& n);
std::string format_constant(double v);
bool is_unary_function(std::string_view name);
bool is_binary_function(std::string_view name);
// The body of a modifier as a tree over a placeholder X of the given type and shape.
NodePtr parse_modifier_body(std::string_view name, std::string_view body, ValueType type, Shape s);

}  // namespace molaccel::linalg
