// Helpers shared by the unit tests of service/cluster: bounded waits, a
// store whose transactions can be held at a gate (so batching is seen
// deterministically), and records written straight into a store.
#ifndef TENSORD_TESTS_UNIT_CLUSTER_TEST_SUPPORT_H_
#define TENSORD_TESTS_UNIT_CLUSTER_TEST_SUPPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/cluster/kv_store.h"
#include "service/cluster/memory_kv_store.h"
#include "service/cluster/name_record.h"
#include "service/cluster/node_record.h"
#include "service/common/cluster_view.h"
#include "service/common/mutex.h"

namespace tensord {
namespace cluster_test {

// Polls `condition` until it holds or `timeout` passes; whether it held.
inline bool WaitUntil(const std::function<bool()>& condition,
                      absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// A MemoryKvStore whose Txn calls wait while the gate is closed: a test
// closes it, lets callers pile up behind one transaction in flight, and
// opens it to see how many transactions they shared.
class GatedKvStore final : public KvStore {
 public:
  explicit GatedKvStore(std::shared_ptr<MemoryKvStore> inner) : inner_(std::move(inner)) {}

  void Close() {
    MutexLock lock(&mu_);
    closed_ = true;
  }
  void Open() {
    MutexLock lock(&mu_);
    closed_ = false;
    changed_.SignalAll();
  }
  // Transactions waiting at the closed gate now.
  int waiting() const {
    MutexLock lock(&mu_);
    return waiting_;
  }
  bool AwaitWaiting(int count, absl::Duration timeout = absl::Seconds(10)) const {
    return WaitUntil([&] { return waiting() >= count; }, timeout);
  }

  absl::StatusOr<KvTxnResult> Txn(std::span<const KvCompare> compares,
                                  std::span<const KvOp> success,
                                  std::span<const KvOp> failure) override {
    {
      MutexLock lock(&mu_);
      ++waiting_;
      while (closed_) changed_.Wait(&mu_);
      --waiting_;
    }
    return inner_->Txn(compares, success, failure);
  }
  absl::StatusOr<KvPage> Range(absl::string_view key, absl::string_view range_end, int64_t revision,
                               int64_t limit) override {
    return inner_->Range(key, range_end, revision, limit);
  }
  absl::StatusOr<std::vector<EtcdKeyValue>> KeysCreatedAt(absl::string_view key,
                                                          absl::string_view range_end,
                                                          int64_t revision) override {
    return inner_->KeysCreatedAt(key, range_end, revision);
  }
  absl::Status Watch(absl::string_view prefix, int64_t start_revision,
                     const WatchHandler& on_events, KvWatchCancel& cancel) override {
    return inner_->Watch(prefix, start_revision, on_events, cancel);
  }
  // The next `count` lease grants fail with `status` (a slow or absent store).
  void FailGrants(int count, absl::Status status) {
    MutexLock lock(&mu_);
    failed_grants_ = count;
    grant_failure_ = std::move(status);
  }
  // The next `count` leases granted expire at once, as a lease does when
  // etcd is slower than its TTL between the grant and the first put.
  void ExpireGrantedLeases(int count) {
    MutexLock lock(&mu_);
    expired_grants_ = count;
  }
  absl::StatusOr<EtcdLease> GrantLease(absl::Duration ttl) override {
    {
      MutexLock lock(&mu_);
      if (failed_grants_ > 0) {
        --failed_grants_;
        return grant_failure_;
      }
      if (expired_grants_ > 0) {
        --expired_grants_;
        absl::StatusOr<EtcdLease> granted = inner_->GrantLease(ttl);
        if (granted.ok()) inner_->ExpireLease(granted->id);
        return granted;
      }
    }
    return inner_->GrantLease(ttl);
  }
  absl::Status RevokeLease(int64_t lease) override { return inner_->RevokeLease(lease); }
  absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease) override {
    return inner_->KeepAliveOnce(lease);
  }
  absl::Status Compact(int64_t revision) override { return inner_->Compact(revision); }
  uint64_t errors() const override { return inner_->errors(); }

 private:
  const std::shared_ptr<MemoryKvStore> inner_;
  mutable Mutex mu_;
  CondVar changed_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  int failed_grants_ ABSL_GUARDED_BY(mu_) = 0;
  int expired_grants_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status grant_failure_ ABSL_GUARDED_BY(mu_);
};

// Writes one key; the revision of the write.
inline int64_t PutKey(KvStore& store, const std::string& key, const std::string& value,
                      int64_t lease = 0) {
  const KvOp put = KvOp::Put(key, value, lease);
  absl::StatusOr<KvTxnResult> written = store.Txn({}, {&put, 1}, {});
  return written.ok() ? written->revision : -1;
}

inline int64_t DeleteKey(KvStore& store, const std::string& key) {
  const KvOp remove = KvOp::Delete(key);
  absl::StatusOr<KvTxnResult> written = store.Txn({}, {&remove, 1}, {});
  return written.ok() ? written->revision : -1;
}

// A record as a put writes it (its origin is the write's revision).
inline NameRecord SampleRecord(const std::string& name, std::string writer = "node-a",
                               uint64_t total_bytes = 64, uint32_t crc32c = 0x1234) {
  NameRecord record;
  record.name = name;
  record.writer = writer;
  record.total_bytes = total_bytes;
  record.crc32c = crc32c;
  record.holders = {writer};
  return record;
}

// Writes `record` as a put orders it; the revision of the write (its origin).
inline int64_t PutNameRecord(KvStore& store, const std::string& prefix, const NameRecord& record) {
  return PutKey(store, NameRecordKey(prefix, record.name),
                EncodeNameRecord(record, /*with_origin=*/false));
}

inline ClusterMember SampleMember(const std::string& node) {
  return ClusterMember{.node_name = node,
                       .advertise_address = "127.0.0.1:1",
                       .server_version = "test",
                       .start_time_unix_ms = 1,
                       .instance_id = node + "/1"};
}

// Registers `node` as a member under `prefix` (on `lease` when not 0).
inline int64_t PutMember(KvStore& store, const std::string& prefix, const std::string& node,
                         int64_t lease = 0) {
  return PutKey(store, prefix + "/nodes/" + node, EncodeNodeRecord(SampleMember(node)), lease);
}

}  // namespace cluster_test
}  // namespace tensord

#endif  // TENSORD_TESTS_UNIT_CLUSTER_TEST_SUPPORT_H_
