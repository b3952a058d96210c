// Container memory: host memory (CPU workers, CPU-only builds) or device memory through the
// CUDA backend.
#include <cstdlib>
#include <cstring>

#include "linalg/backend.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

std::string Placement::describe() const {
  return device >= 0 ? fmt::format("gpu:{}", device) : std::string("host");
}

Placement placement_of(const Resources& resources) {
  Placement p;
  if (resources.uses_gpu() && !resources.gpus().empty()) p.device = resources.gpus().front();
  p.cpu_threads = resources.cpu_threads();
  return p;
}

namespace detail {

struct Storage {
  Placement where;
  void* ptr = nullptr;
  std::size_t bytes = 0;

  Storage(const Placement& p, std::size_t n_bytes) : where(p), bytes(n_bytes) {
    if (where.on_gpu()) {
#ifdef MOLACCEL_HAVE_CUDA
      ptr = gpu::allocate(where.device, bytes);
#else
      MOLACCEL_THROW(NotCompiled, "linalg GPU containers (this build has no CUDA)");
#endif
    } else {
      // 64-byte alignment: whole cache lines and aligned SIMD loads on the CPU.
      const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
      ptr = std::aligned_alloc(64, rounded);
      if (!ptr) throw std::bad_alloc();
      std::memset(ptr, 0, rounded);
    }
  }
  ~Storage() {
    if (where.on_gpu()) {
#ifdef MOLACCEL_HAVE_CUDA
      gpu::release(where.device, ptr);
#endif
    } else {
      std::free(ptr);
    }
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

Array::Array(const Placement& where, ValueType type, std::size_t count)
    : storage_(std::make_shared<Storage>(where, count * size_of(type))),
      offset_(0),
      count_(count),
      type_(type) {}

const Placement& Array::where() const {
  static const Placement host;
  return storage_ ? storage_->where : host;
}

void* Array::data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->ptr) + offset_ * size_of(type_);
}

void Array::upload(const void* host, std::size_t count, std::size_t first) {
  MOLACCEL_EXPECTS(first + count <= count_, "linalg upload out of range");
  if (count == 0) return;
  char* dst = static_cast<char*>(data()) + first * size_of(type_);
  const std::size_t bytes = count * size_of(type_);
  if (storage_->where.on_gpu()) {
#ifdef MOLACCEL_HAVE_CUDA
    gpu::upload(storage_->where.device, dst, host, bytes);
#endif
  } else {
    std::memcpy(dst, host, bytes);
  }
}

void Array::download(void* host, std::size_t count, std::size_t first) const {
  MOLACCEL_EXPECTS(first + count <= count_, "linalg download out of range");
  if (count == 0) return;
  const char* src = static_cast<const char*>(data()) + first * size_of(type_);
  const std::size_t bytes = count * size_of(type_);
  if (storage_->where.on_gpu()) {
#ifdef MOLACCEL_HAVE_CUDA
    gpu::download(storage_->where.device, host, src, bytes);
#endif
  } else {
    std::memcpy(host, src, bytes);
  }
}

Array Array::view(std::size_t first, std::size_t count) const {
  MOLACCEL_EXPECTS(first + count <= count_, "linalg view out of range");
  Array v = *this;
  v.offset_ = offset_ + first;
  v.count_ = count;
  return v;
}

}  // namespace detail
}  // namespace molaccel::linalg
