// The tile form of a generated program kernel (KernelShape::tile_h, a constant stencil): the
// windows in shared memory that a block fills before a segment's rows, each the operand of a
// product over the tile and `depth` hops of the stencil around it (docs/linalg.md, "Tile form").
// The emitter (program_cuda.cpp) writes a window's cell code and its reads; this class keeps the
// segment's windows, shares a one-hop window with a two-hop one of the same operand, names the
// shared arrays and writes the passes that fill them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "linalg/program/program_cuda.hpp"

namespace molaccel::linalg::program {

class TileWindows {
 public:
  explicit TileWindows(const KernelShape& shape);

  // The window `depth` hops around the tile: its rows and columns (origin depth x up() rows above
  // and depth x left() columns left of the tile).
  int height(int depth) const { return shape_.tile_h + depth * (up_ + down_); }
  int width(int depth) const { return shape_.tile_w + depth * (left_ + right_); }
  int up() const { return up_; }
  int left() const { return left_; }

  void clear() { windows_.clear(); }  // a new segment
  bool empty() const { return windows_.empty(); }
  // The window (depth, cell code `pre` then `value` at row mp_r) of this segment: its id, the
  // same for the same code at one depth.
  int add(int depth, const std::string& pre, const std::string& value);
  // A read of window `id` at (row, column) of its depth's coordinates: a token that resolve()
  // rewrites.
  static std::string read(int id, const std::string& row, const std::string& column);
  // The passes that fill the segment's windows (two hops first, which the one-hop ones read;
  // a __syncthreads after each depth), with `code` rewritten to read them.
  std::string resolve(std::string& code);
  // The kernel's shared arrays: the most windows of a depth any segment used.
  std::string declarations() const;

 private:
  struct Window {
    std::string key;  // the code of a cell's value
    int depth = 1;
    std::string pass;  // the loop that fills it
  };
  KernelShape shape_;
  int up_ = 0, down_ = 0, left_ = 0, right_ = 0;  // the stencil's reach (grid rows, columns)
  std::vector<Window> windows_;
  std::size_t count_[3] = {0, 0, 0};
};

}  // namespace molaccel::linalg::program
