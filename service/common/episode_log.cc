#include "service/common/episode_log.h"

#include "service/common/log.h"

namespace tensord {

void EpisodeLog::Note(absl::string_view where, absl::string_view detail, absl::Time now) {
  MutexLock lock(&mu_);
  if (active_ && now - last_failure_ >= quiet_period_) EndLocked(now);
  ++failures_;
  last_failure_ = now;
  if (active_) {
    ++episode_failures_;
    return;
  }
  active_ = true;
  started_ = now;
  episode_failures_ = 1;
  ++episodes_;
  Log(LogLevel::kWarning, event_, {{"where", where}, {"detail", detail}});
}

void EpisodeLog::Tick(absl::Time now) {
  MutexLock lock(&mu_);
  if (active_ && now - last_failure_ >= quiet_period_) EndLocked(now);
}

void EpisodeLog::EndLocked(absl::Time now) {
  active_ = false;
  Log(LogLevel::kInfo, event_ + "_ended",
      {{"failures", episode_failures_},
       {"lasted_ms", absl::ToInt64Milliseconds(last_failure_ - started_)},
       {"quiet_ms", absl::ToInt64Milliseconds(now - last_failure_)}});
}

uint64_t EpisodeLog::failures() const {
  MutexLock lock(&mu_);
  return failures_;
}

uint64_t EpisodeLog::episodes() const {
  MutexLock lock(&mu_);
  return episodes_;
}

EpisodeLog& FdExhaustionLog() {
  static EpisodeLog* log = new EpisodeLog("fd_exhausted");
  return *log;
}

}  // namespace tensord
