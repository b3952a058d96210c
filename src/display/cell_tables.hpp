// Cell tables of the fast paths (cpu/ and cuda/), generated once from the cube's geometry.
//
// A cell is split into six tetrahedra 000 -> e_a -> e_a + e_b -> 111, one per order (a, b, c) of the
// axes (Freudenthal). Corner c of a cell is a 3-bit offset (bit 0 = +i, bit 1 = +j, bit 2 = +k);
// every tetrahedron edge joins a corner to a corner that contains it, so it is the grid edge from
// the lower corner along a forward step (1..7). The reference builds its triangles on its own.
#pragma once

#include <cstdint>

namespace molaccel::display::detail {

inline constexpr int kMaxCellTriangles = 12;  // six tetrahedra, at most two triangles each

// A cell edge is coded corner << 3 | step: the grid edge from the cell's corner along `step`.
struct CellTables {
  std::uint8_t count[256];                         // triangles of each case
  std::uint8_t edges[256][kMaxCellTriangles * 3];  // their cell edges, counter-clockwise from outside
};

// Case bit c is set when corner c is inside (value > level). Built on first use, thread-safely.
const CellTables& cell_tables();

}  // namespace molaccel::display::detail
