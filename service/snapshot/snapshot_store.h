// Durable tensors on disk: writes the registry's durable tensors to one
// snapshot file in a directory, atomically, and restores them at start.
#ifndef TENSORD_SERVICE_SNAPSHOT_SNAPSHOT_STORE_H_
#define TENSORD_SERVICE_SNAPSHOT_SNAPSHOT_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service/common/mutex.h"
#include "service/common/scoped_fd.h"
#include "service/registry/registry.h"

namespace tensord {

// What to do with a snapshot that fails its checks at restore.
enum class CorruptSnapshotPolicy {
  // Restore nothing and fail: the operator decides (the default).
  kRefuse,
  // Restore the tensors that verify, set the damaged file aside as
  // `<file>.corrupt` (kept as evidence; the next snapshot replaces the
  // original) and go on. Each damaged tensor is logged at error level.
  kLoadValid,
};

struct SnapshotSummary {
  std::string path;
  uint64_t tensor_count = 0;
  uint64_t total_bytes = 0;  // tensor bytes
};

struct RestoreSummary {
  std::string path;
  bool found = false;     // a snapshot file existed
  uint64_t restored = 0;  // tensors published
  uint64_t corrupt = 0;   // tensors (or 1 for a whole unreadable file) skipped
  // Intact tensors left out under kLoadValid because they did not fit the
  // registry's limits (--max-host-bytes, --max-tensors).
  uint64_t skipped = 0;
};

// Thread-safe; snapshots are taken one at a time. One store (one server) per
// directory: the store holds an exclusive lock on it while it lives.
class SnapshotStore {
 public:
  // The snapshot lives at `directory`/tensord.snapshot. Takes an exclusive
  // flock on `directory`/.tensord.lock, held until the store is destroyed;
  // FAILED_PRECONDITION naming the directory when another store (in this or
  // another process) holds it.
  static absl::StatusOr<std::unique_ptr<SnapshotStore>> Open(std::string directory);

  const std::string& directory() const { return directory_; }
  std::string snapshot_path() const;

  // Writes the latest version of every durable tensor (Registry::
  // AcquireDurable) to a new uniquely named temporary file, fsyncs it, renames it over the
  // snapshot and fsyncs the directory, so a crash at any point leaves either
  // the old snapshot or the new one, whole. Readers and writers of the
  // registry go on meanwhile: the leases keep the written versions' bytes.
  absl::StatusOr<SnapshotSummary> Write(const Registry& registry);

  // Publishes the snapshot's tensors into `registry` (which should be empty)
  // with their versions and creation times. Every tensor is checked before
  // the first is published. A missing snapshot restores nothing and is OK.
  // A damaged one is logged (file and reason) and, under kRefuse, is
  // DATA_LOSS with nothing published. Tensors beyond the registry's limits
  // (--max-host-bytes, --max-tensors lowered since the snapshot) are, under
  // kRefuse, RESOURCE_EXHAUSTED naming the numbers with nothing published;
  // under kLoadValid, each that does not fit is logged and skipped.
  // Also removes temporary files that a crash during a snapshot left (safe:
  // the lock keeps every other writer out of the directory).
  absl::StatusOr<RestoreSummary> Restore(Registry& registry, CorruptSnapshotPolicy policy);

 private:
  SnapshotStore(std::string directory, ScopedFd lock);
  void RemoveStaleTemporaries() const;

  const std::string directory_;
  const ScopedFd lock_;  // flock'ed for the store's life
  Mutex write_mutex_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_SNAPSHOT_SNAPSHOT_STORE_H_
