// Reads name records for the read path, linearizably: a read is sent to
// etcd after it was asked for, so it sees every write acknowledged before.
// Reads asked for while others are in flight share the next transaction
// (up to --etcd-max-txn-ops names each): under load a node pays one etcd
// round trip for many readers, not one each.
#ifndef TENSORD_SERVICE_CLUSTER_RECORD_READER_H_
#define TENSORD_SERVICE_CLUSTER_RECORD_READER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "service/cluster/kv_store.h"
#include "service/cluster/name_record.h"
#include "service/common/mutex.h"

namespace tensord {

struct RecordReaderOptions {
  std::string prefix;
  // Names per etcd transaction (etcd's --max-txn-ops).
  size_t max_names_per_txn = 128;
  // Transactions in flight at once.
  size_t threads = 4;
};

// Thread-safe.
class RecordReader {
 public:
  // A name's record, nullopt when it has none, or why it could not be read.
  using Answer = absl::StatusOr<std::optional<NameRecord>>;
  using Done = absl::AnyInvocable<void(std::vector<Answer>) &&>;

  RecordReader(std::shared_ptr<KvStore> store, RecordReaderOptions options);
  // Answers what waits UNAVAILABLE and joins the threads.
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // The records of `names`, one answer per name in order, to `done` on a
  // reader thread (inline when stopping).
  void Read(std::vector<std::string> names, Done done);

  // Reads of one transaction so far, and transactions (for metrics and tests).
  uint64_t names_read() const;
  uint64_t transactions() const;

 private:
  struct Request {
    std::vector<std::string> names;
    std::vector<Answer> answers;
    size_t left = 0;
    Done done;
  };
  // A name of a request waiting for its answer.
  struct Slot {
    std::shared_ptr<Request> request;
    size_t index = 0;
  };
  void WorkLoop();
  // Reads one batch and answers its slots.
  void ReadBatch(std::vector<Slot> batch);

  const std::shared_ptr<KvStore> store_;
  const RecordReaderOptions options_;

  mutable Mutex mu_;
  CondVar work_ready_;
  std::deque<Slot> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t names_read_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t transactions_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_RECORD_READER_H_
