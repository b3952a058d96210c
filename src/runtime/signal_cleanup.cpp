// Temporary output files that an interrupt must not leave behind (secure_file.hpp): each one is
// registered in a fixed table while it exists; the handler of SIGINT, SIGTERM and SIGHUP unlinks
// the registered paths and ends the process with 128 + the signal. Only async-signal-safe calls in
// the handler: atomics, unlink, write, _exit.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "molaccel/runtime.hpp"
#include "runtime/secure_file.hpp"

namespace molaccel {
namespace detail {
namespace {

constexpr int kSlots = 256;       // temporaries alive at once (one per output being written)
constexpr int kPathBytes = 4096;  // PATH_MAX on Linux

enum : int { kFree = 0, kFilling = 1, kArmed = 2 };
struct Slot {
  std::atomic<int> state{kFree};
  char path[kPathBytes];
};
Slot slots[kSlots];
std::atomic<bool> installed{false};

void on_signal(int signal) {
  for (auto& slot : slots)
    if (slot.state.load(std::memory_order_acquire) == kArmed) ::unlink(slot.path);
  const char* what = signal == SIGINT ? "molaccel: interrupted\n" : "molaccel: terminated by a signal\n";
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, what, std::strlen(what));
  ::_exit(128 + signal);
}

}  // namespace

CleanupOnSignal::CleanupOnSignal(const std::filesystem::path& path) {
  const std::string& text = path.native();
  if (text.size() >= static_cast<std::size_t>(kPathBytes)) return;  // not registered: no room
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!slots[i].state.compare_exchange_strong(expected, kFilling, std::memory_order_acq_rel)) continue;
    std::memcpy(slots[i].path, text.c_str(), text.size() + 1);
    slots[i].state.store(kArmed, std::memory_order_release);
    slot_ = i;
    return;
  }
}

CleanupOnSignal::~CleanupOnSignal() {
  if (slot_ >= 0) slots[slot_].state.store(kFree, std::memory_order_release);
}

}  // namespace detail

void remove_temporaries_on_signals() {
  if (detail::installed.exchange(true)) return;
  struct sigaction action {};
  action.sa_handler = detail::on_signal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &action, nullptr);
}

}  // namespace molaccel
