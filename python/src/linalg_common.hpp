// What the linalg bindings share (linalg.cpp, linalg_expression.cpp, linalg_program.cpp): the
// CSR exchange format and the tree of tuples the Python side records an expression as.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::python {

namespace la = molaccel::linalg;

template <class T>
using Array1 = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// The solver's exchange format, checked the way read_matrix_market leaves it: row pointers from 0
// to nnz, column indices in range, sorted and unique within each row (linalg.cpp).
la::HostCsr<double> to_csr(Array1<std::int32_t> indptr, Array1<std::int32_t> indices, Array1<double> data,
                           std::size_t rows, std::size_t cols);

// A tree of tuples made into the library's expression (the operators C++ code uses):
// (op, a, b) | (op, a) | ("modifier", name, body, a) | a leaf, which `leaf` makes from its tuple
// (the callers' leaves: ("operand", i), ("symbol", i), ("constant", value)). Called with the GIL
// held (linalg_expression.cpp).
using LeafMaker = std::function<la::Expression(const std::string& head, nb::tuple leaf)>;
la::Expression build_expression(nb::handle tree, const LeafMaker& leaf);

// "none" or "jacobi" (linalg.cpp); InputError otherwise.
la::Preconditioner preconditioner_of(const std::string& name);

void bind_linalg_programs(nb::module_& m);

}  // namespace molaccel::python
