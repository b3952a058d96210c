// The tile form's windows in shared memory (program_windows.hpp).
#include "linalg/program/program_windows.hpp"

#include <algorithm>

#include "molaccel/runtime.hpp"

namespace molaccel::linalg::program {

TileWindows::TileWindows(const KernelShape& shape) : shape_(shape) {
  for (int k = 0; k < shape.diagonals; ++k) {
    const auto kk = std::size_t(k);
    up_ = std::max(up_, -shape.grid_a[kk]);
    down_ = std::max(down_, shape.grid_a[kk]);
    left_ = std::max(left_, -shape.grid_b[kk]);
    right_ = std::max(right_, shape.grid_b[kk]);
  }
}

int TileWindows::add(int depth, const std::string& pre, const std::string& value) {
  const std::string key = pre + "=" + value;
  for (std::size_t i = 0; i < windows_.size(); ++i)
    if (windows_[i].depth == depth && windows_[i].key == key) return int(i);
  // A literal stride (the block's threads), so that the pass unrolls and its loads are in flight
  // together; cells outside the grid hold zero.
  windows_.push_back(
      {key, depth,
       fmt::format("#pragma unroll\n"
                   "    for (int mp_c = (int)threadIdx.x; mp_c < {0}; mp_c += {9}) {{\n"
                   "      const int mp_y = mp_c / {1}, mp_x = mp_c - mp_y * {1};\n"
                   "      const long long mp_gi = (long long)mp_i0 - {2} + mp_y, mp_gj = (long long)mp_j0 - "
                   "{3} + mp_x;\n"
                   "      double mp_v = 0.0;\n"
                   "      if (mp_gi >= 0 && mp_gi < {4} && mp_gj >= 0 && mp_gj < {5}) {{\n"
                   "        const long long mp_r = mp_gi * {5} + mp_gj;\n{6}        mp_v = {7};\n"
                   "      }}\n"
                   "      @@S{8}@@[mp_c] = mp_v;\n"
                   "    }}\n",
                   height(depth) * width(depth), width(depth), depth * up_, depth * left_, shape_.grid_height,
                   shape_.grid_width, pre, value, windows_.size(), tile_threads(shape_))});
  return int(windows_.size()) - 1;
}

std::string TileWindows::read(int id, const std::string& row, const std::string& column) {
  return fmt::format("@@R{}|{}|{}@@", id, row, column);
}

std::string TileWindows::resolve(std::string& code) {
  struct Where {
    std::string array;
    int width = 0, dy = 0, dx = 0;  // the array's width; the cell's offset in it
  };
  // A one-hop window whose operand a two-hop one holds reads that one (shifted one hop in); the
  // others get arrays mp_w<depth>_<k>.
  std::vector<Where> where(windows_.size());
  std::size_t count[3] = {0, 0, 0};
  std::string passes[3];
  for (int d = 2; d >= 1; --d)
    for (std::size_t i = 0; i < windows_.size(); ++i) {
      if (windows_[i].depth != d) continue;
      if (d == 1)
        for (std::size_t o = 0; o < windows_.size(); ++o)
          if (windows_[o].depth == 2 && windows_[o].key == windows_[i].key) {
            where[i] = {where[o].array, width(2), up_, left_};
            break;
          }
      if (!where[i].array.empty()) continue;
      where[i] = {fmt::format("mp_w{}_{}", d, count[d]++), width(d), 0, 0};
      passes[d] += windows_[i].pass;
    }
  for (int d = 1; d <= 2; ++d) count_[d] = std::max(count_[d], count[d]);
  // Tokens: @@S<id>@@ the array, @@R<id>|<row>|<column>@@ a cell of it.
  auto rewrite = [&](std::string& text) {
    std::string out;
    for (std::size_t at = 0;;) {
      const std::size_t open = text.find("@@", at);
      if (open == std::string::npos) {
        out += text.substr(at);
        break;
      }
      const std::size_t close = text.find("@@", open + 2);
      MOLACCEL_EXPECTS(close != std::string::npos, "program emission: an unclosed window token");
      out += text.substr(at, open - at);
      const std::string token = text.substr(open + 2, close - open - 2);
      const std::size_t bar = token.find('|');
      const Where& w =
          where.at(std::stoul(token.substr(1, bar == std::string::npos ? std::string::npos : bar - 1)));
      if (token[0] == 'S') {
        out += w.array;
      } else {
        const std::size_t bar2 = token.find('|', bar + 1);
        out += fmt::format("{}[({} + {}) * {} + {} + {}]", w.array, token.substr(bar + 1, bar2 - bar - 1),
                           w.dy, w.width, token.substr(bar2 + 1), w.dx);
      }
      at = close + 2;
    }
    text = std::move(out);
  };
  std::string fill;
  if (!passes[2].empty()) fill += passes[2] + "    __syncthreads();\n";
  if (!passes[1].empty()) fill += passes[1] + "    __syncthreads();\n";
  rewrite(fill);
  rewrite(code);
  return fill;
}

std::string TileWindows::declarations() const {
  std::string out;
  for (int d = 1; d <= 2; ++d)
    for (std::size_t k = 0; k < count_[d]; ++k)
      out += fmt::format("  __shared__ double mp_w{}_{}[{}];  // {} hop(s) around the tile\n", d, k,
                         height(d) * width(d), d);
  return out;
}

}  // namespace molaccel::linalg::program
