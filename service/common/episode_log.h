// Logs a recurring failure once per episode instead of once per failure: a
// warning when the first failure of an episode happens, and one line with
// the count when failures have stopped for a quiet period. Used for fd
// exhaustion and for connections refused at a cap, which under a flood
// would otherwise log thousands of lines a second.
#ifndef TENSORD_SERVICE_COMMON_EPISODE_LOG_H_
#define TENSORD_SERVICE_COMMON_EPISODE_LOG_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/common/mutex.h"

namespace tensord {

// Thread-safe.
class EpisodeLog {
 public:
  // `event` names the condition ("fd_exhausted"); the end line is
  // `<event>_ended`. `detail` is logged with the start (e.g. the limit).
  EpisodeLog(std::string event, absl::Duration quiet_period = absl::Seconds(1))
      : event_(std::move(event)), quiet_period_(quiet_period) {}

  // One failure at `where`; logs only when it starts an episode.
  void Note(absl::string_view where, absl::string_view detail, absl::Time now);
  // Ends the episode when nothing failed for the quiet period. Call it
  // periodically (the listeners do, every second) and before Note().
  void Tick(absl::Time now);

  // Failures since the process started, and episodes begun.
  uint64_t failures() const;
  uint64_t episodes() const;

 private:
  void EndLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string event_;
  const absl::Duration quiet_period_;
  mutable Mutex mu_;
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time started_ ABSL_GUARDED_BY(mu_);
  absl::Time last_failure_ ABSL_GUARDED_BY(mu_);
  uint64_t episode_failures_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t episodes_ ABSL_GUARDED_BY(mu_) = 0;
};

// The process's one log of fd exhaustion (EMFILE/ENFILE), fed by every
// listener and by calls that failed for want of an fd.
EpisodeLog& FdExhaustionLog();

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_EPISODE_LOG_H_
