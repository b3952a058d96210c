// Memory and disk a job will need, checked before it starts (internal; exposed for the commands
// and tests). A request that cannot fit is refused with the estimate, what is available and the
// option that helps, instead of failing part-way (std::bad_alloc, the kernel's OOM killer, a full
// disk after hours).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>

namespace molaccel::detail {

// Memory this process can still obtain without swapping: MemAvailable (/proc/meminfo), capped by
// RLIMIT_AS and RLIMIT_DATA; nullopt when unknown.
std::optional<std::uint64_t> available_memory();
// Space new files at `output` may take: the free space for unprivileged users of the filesystem of
// its directory (statvfs); nullopt for standard output, devices and pipes (written through: nothing
// is stored) and when unknown. (A file size limit, ulimit -f, is met as a write error, exit 4.)
std::optional<std::uint64_t> output_space(const std::filesystem::path& output);

// Throws InputError naming `what` when `bytes` exceed available_memory(): "<what> needs about X GiB
// of memory and Y GiB are available; <hint>". Unknown availability passes.
void require_memory(double bytes, std::string_view what, std::string_view hint);
// Throws InputError naming `output` when `bytes` (of all the files written beside it) exceed
// output_space(output), in the same words.
void require_output_space(const std::filesystem::path& output, double bytes, std::string_view hint);

// Test seam: replaces what available_memory() and output_space() report (an empty function
// restores the system's numbers). Not thread-safe; for tests only.
void set_resource_probes_for_testing(
    std::function<std::optional<std::uint64_t>()> memory,
    std::function<std::optional<std::uint64_t>(const std::filesystem::path&)> space);

}  // namespace molaccel::detail
