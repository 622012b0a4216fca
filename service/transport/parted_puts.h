// A put carried by several concurrent part streams (PutHeader.part): the
// parts of one upload id share one pending version, each writing its range
// at its offset. Nothing is published until every part has arrived; the
// whole's CRC-32C is combined from the parts' and checked by Publish. The
// last part to arrive publishes for all, and every part's call answers with
// the version; one part failing fails them all. gRPC-free: a part hands in
// how to answer its call.
#ifndef TENSORD_SERVICE_TRANSPORT_PARTED_PUTS_H_
#define TENSORD_SERVICE_TRANSPORT_PARTED_PUTS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/common/mutex.h"
#include "service/registry/cluster_access.h"
#include "service/registry/registry.h"
#include "service/security/active_streams.h"
#include "service/security/token_authenticator.h"
#include "service/transport/request_validation.h"

namespace tensord {

class PartedPuts;

// One put in parts. Thread-safe; shared by its part calls.
class PartedPut : public std::enable_shared_from_this<PartedPut> {
 public:
  // Called once per waiting part with the put's outcome.
  using Answer = std::function<void(const absl::StatusOr<VersionInfo>&)>;

  PartedPut(PartedPuts& owner, std::string upload_id, ValidatedPut identity,
            uint32_t header_replicas, const TokenGrant* grant, uint32_t replicas,
            PendingVersion pending);

  const std::string& name() const { return identity_.name; }

  // Where the parts write. Writes of disjoint ranges run concurrently;
  // the bytes are sealed only after every part has arrived.
  HostBytes& bytes() { return *bytes_; }

  // Non-OK once the put has failed: the part stops and answers with it.
  absl::Status failure() const;

  // Another part's bytes moved: restarts the idle clock of the parts that
  // wait for it, so a put is cancelled only when none of it moves.
  void Touch();

  // A part's whole range arrived with `crc32c`. `waiting_slot` is the part's
  // place among the open streams, touched while the others progress and
  // released once every part is in (publishing is not idle time); and
  // `answer` how to end its call: called exactly once, here or on another
  // part's thread, once the put is published (and, in a cluster, has its
  // copies) or has failed.
  void Arrived(uint64_t offset, uint32_t crc32c, std::unique_ptr<ActiveStreams::Slot> waiting_slot,
               Answer answer);

  // A part failed or was cancelled: the put fails; the waiting parts answer
  // ABORTED naming `cause`. No effect once every part has arrived.
  void Fail(const absl::Status& cause);

 private:
  friend class PartedPuts;
  struct Part {
    uint64_t length = 0;
    bool arrived = false;
    uint32_t crc32c = 0;
  };
  struct Waiter {
    std::unique_ptr<ActiveStreams::Slot> slot;
    Answer answer;
  };
  enum class State { kReceiving, kPublishing, kEnded };

  // Checks that a joining part's header matches and claims its range.
  absl::Status Claim(const ValidatedPut& put, uint32_t header_replicas, const TokenGrant* grant);
  void Publish();
  void AnswerAll(const absl::StatusOr<VersionInfo>& outcome);
  // Under mutex_: the waiters' places among the open streams, to be
  // released outside it (a release may wait for a watchdog cancel, which
  // can call Fail).
  std::vector<std::unique_ptr<ActiveStreams::Slot>> TakeSlotsLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  PartedPuts& owner_;
  const std::string upload_id_;
  const ValidatedPut identity_;  // the first part's header, its range cleared
  const uint32_t header_replicas_;
  const TokenGrant* const grant_;
  const uint32_t replicas_;  // resolved (cluster)
  // Kept out of pending_ so that writers never race Publish moving it.
  HostBytes* const bytes_;

  mutable Mutex mutex_;
  std::atomic<bool> failed_{false};
  State state_ ABSL_GUARDED_BY(mutex_) = State::kReceiving;
  absl::Status failure_ ABSL_GUARDED_BY(mutex_);
  PendingVersion pending_ ABSL_GUARDED_BY(mutex_);
  // By offset.
  std::map<uint64_t, Part> parts_ ABSL_GUARDED_BY(mutex_);
  uint64_t claimed_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mutex_);
};

// The puts in parts being received, by upload id. Thread-safe; must outlive
// every PartedPut (the service owns it).
class PartedPuts {
 public:
  // `cluster` is null on a single node.
  PartedPuts(Registry& registry, ClusterAccess* cluster);

  // The put `put.part` belongs to, made when this is its first part:
  // `prepare` then resolves the copies and reserves the pending version
  // (its errors returned as they are). A part joining an existing put must
  // carry the same header and `grant` (the caller's token, null when auth is
  // off); INVALID_ARGUMENT for a different header, an overlapping range or
  // more parts than announced, PERMISSION_DENIED for another token.
  struct Prepared {
    uint32_t replicas = 1;
    PendingVersion pending;
  };
  absl::StatusOr<std::shared_ptr<PartedPut>> Join(
      const ValidatedPut& put, uint32_t header_replicas, const TokenGrant* grant,
      const std::function<absl::StatusOr<Prepared>()>& prepare);

  // Puts with parts still to come (for tests and metrics).
  size_t receiving() const;

  // Upload ids remembered after their put ended, so that a late part is
  // answered with how it ended instead of starting a put that could never
  // complete (and reserving its bytes until the idle timeout).
  static constexpr size_t kRememberedEndings = 4096;

 private:
  friend class PartedPut;
  // The put ended: `how` is its failure, or OK once published.
  void Forget(const std::string& upload_id, const PartedPut* put, const absl::Status& how);

  Registry& registry_;
  ClusterAccess* const cluster_;
  mutable Mutex mutex_;
  absl::flat_hash_map<std::string, std::shared_ptr<PartedPut>> puts_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, absl::Status> ended_ ABSL_GUARDED_BY(mutex_);
  // Oldest first.
  std::deque<std::string> ended_order_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_PARTED_PUTS_H_
