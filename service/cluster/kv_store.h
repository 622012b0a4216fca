// etcd as tensord's cluster logic sees it: transactions, paged ranges,
// watches, leases and compaction over plain types. EtcdClient speaks it to a
// real etcd; MemoryKvStore keeps it in memory, so the cluster logic (name
// records, membership) has unit tests without a process.
#ifndef TENSORD_SERVICE_CLUSTER_KV_STORE_H_
#define TENSORD_SERVICE_CLUSTER_KV_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/common/mutex.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace tensord {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  // The lease the key is attached to; 0: none.
  int64_t lease = 0;
};

struct EtcdWatchEvent {
  bool deleted = false;  // a DELETE (or lease expiry); otherwise a PUT
  // For a delete: the key and, in mod_revision, the revision of the delete.
  EtcdKeyValue kv;
};

struct EtcdLease {
  int64_t id = 0;
  // What etcd granted, which may exceed what was asked (etcd has a minimum).
  absl::Duration ttl;
};

// One condition of a transaction: the key's field equals the number (or,
// for kValue, the text). A key that does not exist has create and mod
// revision 0 and lease 0.
struct KvCompare {
  enum class Field { kCreateRevision, kModRevision, kLease, kValue };
  std::string key;
  Field field = Field::kModRevision;
  int64_t number = 0;
  std::string value;

  static KvCompare Absent(std::string key) {
    return {std::move(key), Field::kCreateRevision, 0, {}};
  }
  static KvCompare ModRevisionIs(std::string key, int64_t revision) {
    return {std::move(key), Field::kModRevision, revision, {}};
  }
  static KvCompare LeaseIs(std::string key, int64_t lease) {
    return {std::move(key), Field::kLease, lease, {}};
  }
};

// One operation of a transaction. `range_end` empty: the one key;
// otherwise the keys in [key, range_end) (KvPrefixEnd gives a prefix's).
struct KvOp {
  enum class Kind { kPut, kDelete, kGet };
  Kind kind = Kind::kGet;
  std::string key;
  std::string range_end;
  std::string value;  // kPut
  int64_t lease = 0;  // kPut; 0: none
  // kPut, kDelete: the result carries what the op replaced or removed
  // (etcd's prev_kv).
  bool return_previous = false;

  static KvOp Put(std::string key, std::string value, int64_t lease = 0) {
    return {Kind::kPut, std::move(key), {}, std::move(value), lease, false};
  }
  static KvOp Delete(std::string key) { return {Kind::kDelete, std::move(key), {}, {}, 0, false}; }
  static KvOp Get(std::string key) { return {Kind::kGet, std::move(key), {}, {}, 0, false}; }
  KvOp&& ReturningPrevious() && {
    return_previous = true;
    return std::move(*this);
  }
};

struct KvOpResult {
  std::vector<EtcdKeyValue> values;  // kGet: the keys found
  int64_t deleted = 0;               // kDelete: how many went
  // With return_previous: the key's value before a kPut (none when it was
  // new), the keys a kDelete removed.
  std::vector<EtcdKeyValue> previous;
};

struct KvTxnResult {
  bool succeeded = false;  // the compares held: the success ops ran
  // The store's revision after the transaction: the revision of its writes
  // when it wrote anything.
  int64_t revision = 0;
  std::vector<KvOpResult> results;  // one per op of the branch that ran
};

// Keys of a range as of one revision, at most a page of them.
struct KvPage {
  std::vector<EtcdKeyValue> values;
  bool more = false;  // keys after the last one remain in the range
  // The revision the page is current as of: read further pages at it, and
  // watch from revision + 1 to miss nothing.
  int64_t revision = 0;
};

// Lets another thread end a Watch that blocks in this thread.
class KvWatchCancel {
 public:
  // Ends the watch it guards (now or, if none runs yet, as soon as it starts).
  void Cancel();
  bool cancelled() const;

 private:
  friend class EtcdClient;
  friend class MemoryKvStore;
  mutable Mutex mu_;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// Thread-safe: every method may be called from any thread at once. Errors
// are gRPC's codes as absl::Status: UNAVAILABLE when the store cannot be
// reached; RESOURCE_EXHAUSTED when its space quota is full (etcd's NOSPACE
// alarm), naming what the operator must do.
class KvStore {
 public:
  virtual ~KvStore() = default;

  // If every compare holds, runs `success`, else `failure`, atomically.
  virtual absl::StatusOr<KvTxnResult> Txn(std::span<const KvCompare> compares,
                                          std::span<const KvOp> success,
                                          std::span<const KvOp> failure) = 0;

  // Keys in [key, range_end) in key order, as of `revision` (0: now), at
  // most `limit` of them (0: no limit; callers page with a limit so no
  // answer grows with the store). OUT_OF_RANGE when `revision` was
  // compacted away.
  virtual absl::StatusOr<KvPage> Range(absl::string_view key, absl::string_view range_end,
                                       int64_t revision, int64_t limit) = 0;

  // The keys in [key, range_end) now that were created at `revision` (etcd's
  // min/max_create_revision filter; etcd walks the whole range to find
  // them, so keep such ranges small).
  virtual absl::StatusOr<std::vector<EtcdKeyValue>> KeysCreatedAt(absl::string_view key,
                                                                  absl::string_view range_end,
                                                                  int64_t revision) = 0;

  // Streams every change to keys starting with `prefix` from
  // `start_revision` on, in revision order, to `on_events` (the events of
  // one revision are never split across calls, however many there are),
  // until `on_events` returns false (OK), `cancel` is cancelled
  // (CANCELLED), or the stream breaks (UNAVAILABLE: watch again from the
  // last revision + 1). The first call, once the watch is established, has
  // no events. Blocks. OUT_OF_RANGE when `start_revision` was compacted
  // away: read the prefix again.
  using WatchHandler = std::function<bool(std::vector<EtcdWatchEvent> events)>;
  virtual absl::Status Watch(absl::string_view prefix, int64_t start_revision,
                             const WatchHandler& on_events, KvWatchCancel& cancel) = 0;

  virtual absl::StatusOr<EtcdLease> GrantLease(absl::Duration ttl) = 0;
  // NOT_FOUND when the lease had already expired or been revoked.
  virtual absl::Status RevokeLease(int64_t lease) = 0;
  // Renews the lease once; the TTL it has now. NOT_FOUND when it is gone.
  virtual absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease) = 0;

  // Forgets the history before `revision` (keys' current values stay).
  // FAILED_PRECONDITION-free: compacting to a revision already compacted is OK.
  virtual absl::Status Compact(int64_t revision) = 0;

  // Calls that failed since creation.
  virtual uint64_t errors() const = 0;
};

// An UNAVAILABLE that says the store was reached but answered too slowly
// (no endpoint within the call's deadline), as against one that cannot be
// reached at all: a start may wait out a slow store, not an absent one.
absl::Status KvTimedOut(absl::string_view message);
bool IsKvTimedOut(const absl::Status& status);

// The first key after every key that starts with `prefix` (etcd's
// range_end for a prefix); "\0" when every byte is 0xff.
std::string KvPrefixEnd(absl::string_view prefix);

// The key, or nullopt when it does not exist.
absl::StatusOr<std::optional<EtcdKeyValue>> KvGet(KvStore& store, absl::string_view key);

// The store's revision now, read through one key (cheap at any size: a
// range over many keys costs etcd 3.4 a walk of all of them, limit or not).
absl::StatusOr<int64_t> KvRevisionNow(KvStore& store);

// At most `limit` keys of [from, range_end) in key order, as of `revision`
// (0: now; the page says which). etcd 3.4 walks every key of a range to
// count it whatever the limit, so paging through a million keys would read
// about n^2/limit of them; this reads through windows of keys that share
// ever shorter prefixes of `from` (each a bounded range) until one holds a
// page, so a page costs about the keys of the smallest window holding it.
absl::StatusOr<KvPage> KvRangePage(KvStore& store, absl::string_view from,
                                   absl::string_view range_end, int64_t revision, int64_t limit);

// Reads every key starting with `prefix`, `page_size` keys per call, all at
// one revision (the first page's), handing each page to `on_page`; returns
// that revision. A store answer never holds more than a page.
absl::StatusOr<int64_t> KvReadPrefix(KvStore& store, absl::string_view prefix, int64_t page_size,
                                     const std::function<void(std::vector<EtcdKeyValue>)>& on_page);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_KV_STORE_H_
