// CPU-only build: no GPU is ever reported, and binding a GPU worker is a build error at run time.
#include "runtime/device_hooks.hpp"

namespace molaccel::detail {

std::vector<GpuInfo> query_gpus(std::string& reason) {
  reason = "this build of molaccel has no CUDA support";
  return {};
}

void refresh_free_memory(std::vector<GpuInfo>&) noexcept {}

void bind_thread_to_device(int) {
  MOLACCEL_THROW(NotCompiled, "CUDA backend (this build of molaccel has no CUDA support)");
}

void release_thread_device() noexcept {}

void* allocate_page_locked(std::size_t) noexcept {
  return nullptr;
}
void free_page_locked(void*) noexcept {}

}  // namespace molaccel::detail
