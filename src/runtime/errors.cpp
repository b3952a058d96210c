#include <string>

#include "molaccel/runtime.hpp"

namespace molaccel {

Error::Error(std::string message, const char* file, int line)
    : std::runtime_error(std::move(message)), file_(file ? file : ""), line_(line) {}

namespace {
std::string input_message(const std::string& path, std::size_t line, const std::string& message) {
  if (path.empty()) return message;
  if (line == 0) return fmt::format("{}: {}", path, message);
  return fmt::format("{}:{}: {}", path, line, message);
}
}  // namespace

InputError::InputError(std::string path, std::size_t line, std::string message, const char* file,
                       int src_line)
    : Error(input_message(path, line, message), file, src_line),
      path_(std::move(path)),
      line_(line),
      detail_(std::move(message)) {}

CudaError::CudaError(int code, std::string message, const char* file, int line)
    : Error(std::move(message), file, line), code_(code) {}

// cudaErrorMemoryAllocation is 2 in every CUDA version.
bool CudaError::is_out_of_memory() const noexcept {
  return code_ == 2;
}

NvrtcError::NvrtcError(std::string message, std::string log, std::string offending_line, const char* file,
                       int line)
    : Error(std::move(message), file, line),
      log_(std::move(log)),
      offending_line_(std::move(offending_line)) {}

NotCompiled::NotCompiled(std::string what_is_missing, const char* file, int line)
    : Error(fmt::format("not compiled: {}", what_is_missing), file, line) {}

}  // namespace molaccel
