#include "client/tensorctl/progress_bar.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/common/byte_size.h"

namespace tensord::tensorctl {
namespace {

// Carriage return plus "erase to end of line": redraws in place whatever the
// previous line's length was.
constexpr const char kEraseLine[] = "\r\x1b[K";

}  // namespace

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)),
      enabled_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { Finish(); }

ProgressCallback ProgressBar::Callback() {
  return [this](uint64_t done, uint64_t total) { Update(done, total); };
}

void ProgressBar::Update(uint64_t done, uint64_t total) {
  if (!enabled_ || total < kMinBytes) return;
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(&mutex_);
  if (finished_) return;
  // The final update is always drawn so a finished transfer never shows 97%.
  if (drawn_ && done < total && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  Draw(done, total, now);
}

void ProgressBar::Draw(uint64_t done, uint64_t total, std::chrono::steady_clock::time_point now) {
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double percent = 100.0 * static_cast<double>(done) / static_cast<double>(total);
  std::string line = absl::StrFormat("%s%s %5.1f%% %s / %s", kEraseLine, label_, percent,
                                     FormatByteSize(done), FormatByteSize(total));
  if (seconds > 0.05) {
    absl::StrAppend(&line, "  ",
                    FormatByteSize(static_cast<uint64_t>(static_cast<double>(done) / seconds)),
                    "/s");
  }
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Finish() {
  MutexLock lock(&mutex_);
  finished_ = true;
  if (!drawn_) return;
  std::fputs(kEraseLine, stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace tensord::tensorctl
