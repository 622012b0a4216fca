// A one-line transfer progress display on stderr for tensorctl.
#ifndef TENSORD_CLIENT_TENSORCTL_PROGRESS_BAR_H_
#define TENSORD_CLIENT_TENSORCTL_PROGRESS_BAR_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "service/common/mutex.h"
#include "tensord/client.h"

namespace tensord::tensorctl {

// Shows percentage, bytes done/total and throughput for transfers of at
// least kMinBytes, only when stderr is a terminal (scripts and logs get
// nothing). Redraws at most every kRedrawInterval so that fast chunk
// callbacks cost almost nothing. Safe to update from any thread; the line is
// erased when the bar is finished or destroyed.
class ProgressBar {
 public:
  static constexpr uint64_t kMinBytes = uint64_t{4} << 20;
  static constexpr std::chrono::milliseconds kRedrawInterval{100};

  // `label` starts the line, e.g. "put weights".
  explicit ProgressBar(std::string label);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void Update(uint64_t done, uint64_t total);
  // A callback for PutOptions/FetchOptions that updates this bar; the bar
  // must outlive the call it is given to.
  ProgressCallback Callback();
  // Erases the line (if one was drawn); later updates draw nothing.
  void Finish();

 private:
  void Draw(uint64_t done, uint64_t total, std::chrono::steady_clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const std::string label_;
  const bool enabled_;
  const std::chrono::steady_clock::time_point start_;
  Mutex mutex_;
  std::chrono::steady_clock::time_point last_draw_ ABSL_GUARDED_BY(mutex_);
  bool drawn_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace tensord::tensorctl

#endif  // TENSORD_CLIENT_TENSORCTL_PROGRESS_BAR_H_
