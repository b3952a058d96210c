// Logging and progress bars on stderr.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::warn)};
std::atomic<bool> g_progress{true};
std::mutex g_stderr_mutex;
}  // namespace

void set_log_level(LogLevel level) {
  g_level = static_cast<int>(level);
}
LogLevel log_level() {
  return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed));
}

void log_message(LogLevel level, std::string_view message) {
  static constexpr const char* names[] = {"error", "warning", "info", "debug"};
  std::lock_guard lock(g_stderr_mutex);
  std::fprintf(stderr, "molaccel: %s: %.*s\n", names[static_cast<int>(level)],
               static_cast<int>(message.size()), message.data());
}

bool trace_enabled(std::string_view engine) {
  // Parsed once: the list is a user setting for a whole run, not a switch to flip mid-process.
  static const std::vector<std::string> engines = [] {
    std::vector<std::string> names;
    const char* value = std::getenv("MOLACCEL_TRACE");
    std::string_view rest = value ? value : "";
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      std::string_view name = rest.substr(0, comma);
      if (!name.empty()) names.emplace_back(name);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    return names;
  }();
  return std::any_of(engines.begin(), engines.end(),
                     [&](const std::string& name) { return name == engine || name == "all"; });
}

void trace_message(std::string_view engine, std::string_view message) {
  if (!trace_enabled(engine)) return;
  std::lock_guard lock(g_stderr_mutex);
  std::fprintf(stderr, "molaccel trace %.*s: %.*s\n", static_cast<int>(engine.size()), engine.data(),
               static_cast<int>(message.size()), message.data());
}

void set_progress_enabled(bool enabled) {
  g_progress = enabled;
}
bool progress_enabled() {
  return g_progress.load(std::memory_order_relaxed);
}

struct ProgressBar::Impl {
  static constexpr double kFirstDraw = 0.5;  // seconds
  std::string title, unit;
  std::size_t total = 0, done = 0;
  double start = 0, last_draw = 0;
  bool active = false, finished = false, drawn = false;
  std::mutex mutex;

  // Nothing is drawn during the first half second (a stage that short needs no bar), then at
  // most ten times a second; the final line only for a bar that was drawn.
  void draw(bool final_draw) {
    const double now = now_seconds();
    if (final_draw ? !drawn : now - start < kFirstDraw || now - last_draw < 0.1) return;
    drawn = true;
    last_draw = now;
    const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    constexpr int width = 30;
    const int filled = static_cast<int>(frac * width);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(width, '.');
    const double elapsed = now - start;
    std::string eta;
    if (done > 0 && done < total)
      eta = fmt::format(" eta {:.0f}s",
                        elapsed / static_cast<double>(done) * static_cast<double>(total - done));
    std::lock_guard lock(g_stderr_mutex);
    std::fprintf(stderr, "\r%s [%s] %3.0f%% %zu/%zu %s %.1fs%s\x1b[K", title.c_str(), bar.c_str(),
                 frac * 100.0, done, total, unit.c_str(), elapsed, eta.c_str());
    if (final_draw) std::fputc('\n', stderr);
    std::fflush(stderr);
  }
};

ProgressBar::ProgressBar(std::string title, std::size_t total, std::string unit)
    : impl_(std::make_unique<Impl>()) {
  impl_->title = std::move(title);
  impl_->unit = std::move(unit);
  impl_->total = total;
  impl_->start = now_seconds();
  impl_->active = progress_enabled() && stderr_is_terminal();
}

ProgressBar::~ProgressBar() {
  finish();
}

void ProgressBar::advance(std::size_t n) {
  std::lock_guard lock(impl_->mutex);
  impl_->done = std::min(impl_->total, impl_->done + n);
  if (impl_->active) impl_->draw(false);
}

void ProgressBar::set(std::size_t done) {
  std::lock_guard lock(impl_->mutex);
  impl_->done = std::min(impl_->total, done);
  if (impl_->active) impl_->draw(false);
}

void ProgressBar::finish() {
  std::lock_guard lock(impl_->mutex);
  if (impl_->active && !impl_->finished) impl_->draw(true);
  impl_->finished = true;
}

}  // namespace molaccel
