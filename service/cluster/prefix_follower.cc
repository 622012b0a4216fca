#include "service/cluster/prefix_follower.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"

namespace tensord {
namespace {

// Keys per page of the first read: ~200 B each, far below gRPC's 4 MiB.
constexpr int64_t kReadPageKeys = 2000;

}  // namespace

PrefixFollower::PrefixFollower(std::shared_ptr<KvStore> store, std::string prefix, bool read_first,
                               std::string what, PrefixFollowerCallbacks callbacks)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      read_first_(read_first),
      what_(std::move(what)),
      callbacks_(std::move(callbacks)),
      log_(absl::StrCat("cluster_follow_failing")) {}

PrefixFollower::~PrefixFollower() { Stop(); }

void PrefixFollower::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void PrefixFollower::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    moved_.SignalAll();
  }
  cancel_.Cancel();
  if (thread_.joinable()) thread_.join();
}

int64_t PrefixFollower::revision() const {
  MutexLock lock(&mu_);
  return revision_;
}

bool PrefixFollower::AwaitRevision(int64_t revision, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (revision_ < revision && !stopping_) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    moved_.WaitWithTimeout(&mu_, left);
  }
  return revision_ >= revision;
}

absl::Status PrefixFollower::health() const {
  MutexLock lock(&mu_);
  return health_;
}

void PrefixFollower::Loop() {
  bool need_read = true;
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
    }
    const absl::Status status = FollowOnce(need_read);
    MutexLock lock(&mu_);
    if (stopping_) return;
    if (status.code() == absl::StatusCode::kOutOfRange) {
      need_read = true;  // compacted: read again (or report the gap)
      continue;
    }
    health_ = status.ok() ? absl::UnavailableError("watch ended") : status;
    log_.Note(what_, status.ToString(), absl::Now());
    moved_.WaitWithTimeout(&mu_, backoff_);
    // Longer after each failure in a row; back to the first once it follows.
    backoff_ = std::min(backoff_ * 2, absl::Seconds(1));
  }
}

absl::Status PrefixFollower::FollowOnce(bool& need_read) {
  int64_t from = 0;
  {
    MutexLock lock(&mu_);
    from = revision_ + 1;
  }
  if (need_read) {
    int64_t revision = 0;
    if (read_first_) {
      std::vector<EtcdKeyValue> keys;
      TENSORD_ASSIGN_OR_RETURN(revision, KvReadPrefix(*store_, prefix_, kReadPageKeys,
                                                      [&](std::vector<EtcdKeyValue> page) {
                                                        for (EtcdKeyValue& kv : page) {
                                                          keys.push_back(std::move(kv));
                                                        }
                                                      }));
      callbacks_.on_read(std::move(keys), revision);
    } else {
      // Only the current revision.
      TENSORD_ASSIGN_OR_RETURN(revision, KvRevisionNow(*store_));
      if (callbacks_.on_gap) callbacks_.on_gap(from - 1, revision);
    }
    need_read = false;
    {
      MutexLock lock(&mu_);
      revision_ = revision;
      health_ = absl::OkStatus();
      moved_.SignalAll();
    }
    log_.Tick(absl::Now() + absl::Hours(1));
    from = revision + 1;
  }
  return store_->Watch(
      prefix_, from,
      [this](std::vector<EtcdWatchEvent> events) {
        int64_t revision = 0;
        if (!events.empty()) {
          revision = events.back().kv.mod_revision;
          callbacks_.on_events(std::move(events));
        }
        // Established (no events) or moving: current either way.
        MutexLock lock(&mu_);
        revision_ = std::max(revision_, revision);
        health_ = absl::OkStatus();
        backoff_ = kFirstBackoff;
        moved_.SignalAll();
        return !stopping_;
      },
      cancel_);
}

}  // namespace tensord
