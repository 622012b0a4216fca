// MemoryKvStore, the in-memory KvStore the cluster's unit tests run on,
// behaves like etcd where tensord relies on it: one revision per write
// transaction, compares, paged ranges at a revision, compaction, watches
// from a past revision with each revision whole, leases that delete their
// keys in one revision. Also KvReadPrefix, the paged read every follower
// starts with.
#include "service/cluster/memory_kv_store.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/cluster/kv_store.h"
#include "service/common/mutex.h"
#include "tests/unit/cluster_test_support.h"

namespace tensord {
namespace {

using namespace std::string_literals;
using cluster_test::DeleteKey;
using cluster_test::PutKey;
using cluster_test::WaitUntil;

std::vector<std::string> Keys(const std::vector<EtcdKeyValue>& values) {
  std::vector<std::string> keys;
  for (const EtcdKeyValue& kv : values) keys.push_back(kv.key);
  return keys;
}

std::optional<EtcdKeyValue> Get(KvStore& store, const std::string& key) {
  absl::StatusOr<std::optional<EtcdKeyValue>> got = KvGet(store, key);
  EXPECT_TRUE(got.ok()) << got.status();
  return got.ok() ? *got : std::nullopt;
}

// Runs a Watch on a thread of its own, recording each call's events; the
// destructor cancels it and joins.
class WatchRecorder {
 public:
  WatchRecorder(KvStore& store, std::string prefix, int64_t start_revision,
                size_t stop_after_calls = 0)
      : thread_([this, &store, prefix = std::move(prefix), start_revision, stop_after_calls] {
          absl::Status status = store.Watch(
              prefix, start_revision,
              [this, stop_after_calls](std::vector<EtcdWatchEvent> events) {
                MutexLock lock(&mu_);
                // The first call, empty, says the watch is established.
                if (events.empty() && !established_) {
                  established_ = true;
                  return true;
                }
                calls_.push_back(std::move(events));
                return stop_after_calls == 0 || calls_.size() < stop_after_calls;
              },
              cancel_);
          MutexLock lock(&mu_);
          ended_ = std::move(status);
        }) {}
  ~WatchRecorder() {
    cancel_.Cancel();
    thread_.join();
  }

  std::vector<std::vector<EtcdWatchEvent>> calls() const {
    MutexLock lock(&mu_);
    return calls_;
  }
  bool AwaitCalls(size_t count) const {
    return WaitUntil([&] { return calls().size() >= count; });
  }
  // How the watch ended, once it did (nullopt when it still runs at the deadline).
  std::optional<absl::Status> AwaitEnd(absl::Duration timeout = absl::Seconds(10)) const {
    WaitUntil(
        [&] {
          MutexLock lock(&mu_);
          return ended_.has_value();
        },
        timeout);
    MutexLock lock(&mu_);
    return ended_;
  }
  KvWatchCancel& cancel() { return cancel_; }

 private:
  mutable Mutex mu_;
  std::vector<std::vector<EtcdWatchEvent>> calls_ ABSL_GUARDED_BY(mu_);
  bool established_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> ended_ ABSL_GUARDED_BY(mu_);
  KvWatchCancel cancel_;
  std::thread thread_;
};

TEST(MemoryKvStoreTest, EachWriteTransactionTakesOneNewRevision) {
  MemoryKvStore store;
  const int64_t start = store.revision();
  const std::vector<KvOp> puts = {KvOp::Put("k/a", "1"), KvOp::Put("k/b", "2"),
                                  KvOp::Put("k/c", "3")};
  absl::StatusOr<KvTxnResult> written = store.Txn({}, puts, {});
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(written->succeeded);
  EXPECT_EQ(written->revision, start + 1);
  EXPECT_EQ(store.revision(), start + 1);
  EXPECT_EQ(store.write_txns(), 1u);
  for (const char* key : {"k/a", "k/b", "k/c"}) {
    std::optional<EtcdKeyValue> kv = Get(store, key);
    ASSERT_TRUE(kv.has_value()) << key;
    EXPECT_EQ(kv->mod_revision, start + 1);
    EXPECT_EQ(kv->create_revision, start + 1);
    EXPECT_EQ(kv->version, 1);
  }
  // A read-only transaction takes no revision.
  const KvOp get = KvOp::Get("k/a");
  absl::StatusOr<KvTxnResult> read = store.Txn({}, {&get, 1}, {});
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->revision, start + 1);
  EXPECT_EQ(store.write_txns(), 1u);
  // An overwrite keeps the create revision and counts the key's version.
  EXPECT_EQ(PutKey(store, "k/a", "again"), start + 2);
  std::optional<EtcdKeyValue> kv = Get(store, "k/a");
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "again");
  EXPECT_EQ(kv->create_revision, start + 1);
  EXPECT_EQ(kv->mod_revision, start + 2);
  EXPECT_EQ(kv->version, 2);
  // A delete of nothing writes nothing.
  EXPECT_EQ(DeleteKey(store, "k/none"), start + 2);
  EXPECT_EQ(store.write_txns(), 2u);
}

// As etcd's prev_kv: a put returns the value it replaced (none for a new
// key), a delete every key it removed, as they were.
TEST(MemoryKvStoreTest, OpsReturningPreviousGiveWhatTheyReplacedOrRemoved) {
  MemoryKvStore store;
  const int64_t first = PutKey(store, "p/a", "1");
  PutKey(store, "p/b", "2");
  const std::vector<KvOp> ops = {KvOp::Put("p/a", "1b").ReturningPrevious(),
                                 KvOp::Put("p/new", "n").ReturningPrevious(),
                                 KvOp::Put("p/c", "untold")};
  absl::StatusOr<KvTxnResult> written = store.Txn({}, ops, {});
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(written->results[0].previous.size(), 1u);
  EXPECT_EQ(written->results[0].previous[0].value, "1");
  EXPECT_EQ(written->results[0].previous[0].mod_revision, first);
  EXPECT_TRUE(written->results[1].previous.empty());
  EXPECT_TRUE(written->results[2].previous.empty());
  KvOp range = KvOp::Delete("p/a").ReturningPrevious();
  range.range_end = "p/c";
  absl::StatusOr<KvTxnResult> removed = store.Txn({}, {&range, 1}, {});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->results[0].deleted, 2);
  ASSERT_EQ(removed->results[0].previous.size(), 2u);
  EXPECT_EQ(removed->results[0].previous[0].value, "1b");
  EXPECT_EQ(removed->results[0].previous[1].value, "2");
}

// As etcd's min/max_create_revision filter: a key rewritten later keeps
// its create revision; one deleted and written again has a new one.
TEST(MemoryKvStoreTest, KeysCreatedAtFindsTheKeysARevisionCreated) {
  MemoryKvStore store;
  const std::vector<KvOp> puts = {KvOp::Put("g/a", "1"), KvOp::Put("g/b", "2"),
                                  KvOp::Put("h/a", "3")};
  absl::StatusOr<KvTxnResult> created = store.Txn({}, puts, {});
  ASSERT_TRUE(created.ok());
  const int64_t revision = created->revision;
  PutKey(store, "g/a", "rewritten");
  DeleteKey(store, "g/b");
  PutKey(store, "g/b", "again");
  PutKey(store, "g/c", "later");
  absl::StatusOr<std::vector<EtcdKeyValue>> found =
      store.KeysCreatedAt("g/", KvPrefixEnd("g/"), revision);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ((*found)[0].key, "g/a");
  EXPECT_EQ((*found)[0].value, "rewritten");
  EXPECT_TRUE(store.KeysCreatedAt("g/", KvPrefixEnd("g/"), revision + 100)->empty());
}

// Absent, ModRevisionIs and LeaseIs hold exactly when etcd's would, and pick the branch.
TEST(MemoryKvStoreTest, ComparesPickTheBranchThatRuns) {
  MemoryKvStore store;
  const KvCompare absent = KvCompare::Absent("k");
  const KvOp put_first = KvOp::Put("k", "first");
  const KvOp get = KvOp::Get("k");
  absl::StatusOr<KvTxnResult> created = store.Txn({&absent, 1}, {&put_first, 1}, {&get, 1});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(created->succeeded);
  const int64_t created_at = created->revision;

  // Absent no longer holds: the failure branch (a get) runs and writes nothing.
  absl::StatusOr<KvTxnResult> again = store.Txn({&absent, 1}, {&put_first, 1}, {&get, 1});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->succeeded);
  ASSERT_EQ(again->results.size(), 1u);
  ASSERT_EQ(again->results[0].values.size(), 1u);
  EXPECT_EQ(again->results[0].values[0].value, "first");
  EXPECT_EQ(store.revision(), created_at);

  const KvOp put_second = KvOp::Put("k", "second");
  const KvCompare stale = KvCompare::ModRevisionIs("k", created_at - 1);
  absl::StatusOr<KvTxnResult> refused = store.Txn({&stale, 1}, {&put_second, 1}, {});
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->succeeded);
  EXPECT_EQ(Get(store, "k")->value, "first");
  const KvCompare current = KvCompare::ModRevisionIs("k", created_at);
  absl::StatusOr<KvTxnResult> swapped = store.Txn({&current, 1}, {&put_second, 1}, {});
  ASSERT_TRUE(swapped.ok());
  EXPECT_TRUE(swapped->succeeded);
  EXPECT_EQ(Get(store, "k")->value, "second");

  // A missing key compares as mod revision 0 and lease 0.
  const std::vector<KvCompare> missing = {KvCompare::ModRevisionIs("none", 0),
                                          KvCompare::LeaseIs("none", 0)};
  EXPECT_TRUE(store.Txn(missing, {}, {})->succeeded);

  absl::StatusOr<EtcdLease> lease = store.GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease.ok());
  PutKey(store, "leased", "v", lease->id);
  const KvCompare on_lease = KvCompare::LeaseIs("leased", lease->id);
  const KvCompare on_no_lease = KvCompare::LeaseIs("leased", 0);
  EXPECT_TRUE(store.Txn({&on_lease, 1}, {}, {})->succeeded);
  EXPECT_FALSE(store.Txn({&on_no_lease, 1}, {}, {})->succeeded);
  // Every compare must hold.
  const std::vector<KvCompare> mixed = {on_lease, KvCompare::Absent("k")};
  EXPECT_FALSE(store.Txn(mixed, {}, {})->succeeded);
}

TEST(MemoryKvStoreTest, ATransactionWritingOneKeyTwiceIsRefusedAndWritesNothing) {
  MemoryKvStore store;
  const int64_t before = store.revision();
  for (const std::vector<KvOp>& ops :
       {std::vector<KvOp>{KvOp::Put("k", "1"), KvOp::Put("k", "2")},
        std::vector<KvOp>{KvOp::Put("k", "1"), KvOp::Delete("k")},
        std::vector<KvOp>{KvOp::Put("other", "1"), KvOp::Put("k", "1"), KvOp::Put("k", "1")}}) {
    absl::StatusOr<KvTxnResult> written = store.Txn({}, ops, {});
    EXPECT_EQ(written.status().code(), absl::StatusCode::kInvalidArgument) << written.status();
    EXPECT_NE(written.status().message().find("duplicate key"), std::string::npos);
  }
  EXPECT_EQ(store.revision(), before);
  EXPECT_FALSE(Get(store, "k").has_value());
  EXPECT_FALSE(Get(store, "other").has_value());
  // Reading a key twice is fine.
  const std::vector<KvOp> gets = {KvOp::Get("k"), KvOp::Get("k")};
  EXPECT_TRUE(store.Txn({}, gets, {}).ok());
}

// A transaction etcd refuses is atomic: none of its writes stands, not even
// the ones before the op that failed (here a put on a lease that is gone).
TEST(MemoryKvStoreTest, ATransactionThatFailsPartWayWritesNothing) {
  MemoryKvStore store;
  absl::StatusOr<EtcdLease> lease = store.GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease.ok());
  store.ExpireLease(lease->id);
  const int64_t before = store.revision();
  const std::vector<KvOp> ops = {KvOp::Put("first", "1"), KvOp::Put("second", "2", lease->id)};
  absl::StatusOr<KvTxnResult> written = store.Txn({}, ops, {});
  EXPECT_EQ(written.status().code(), absl::StatusCode::kNotFound) << written.status();
  EXPECT_EQ(store.revision(), before);
  EXPECT_FALSE(Get(store, "first").has_value()) << "a refused transaction left a write behind";
  absl::StatusOr<KvPage> page = store.Range("first", "", 0, 0);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->values.empty());
}

TEST(MemoryKvStoreTest, RangePagesWithLimitAndSaysWhetherMoreRemain) {
  MemoryKvStore store;
  for (const char* key : {"p/a", "p/b", "p/c", "p/d", "p/e", "q/a", "o/z"}) PutKey(store, key, key);
  const std::string end = KvPrefixEnd("p/");
  absl::StatusOr<KvPage> first = store.Range("p/", end, 0, 2);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Keys(first->values), (std::vector<std::string>{"p/a", "p/b"}));
  EXPECT_TRUE(first->more);
  EXPECT_EQ(first->revision, store.revision());
  absl::StatusOr<KvPage> second = store.Range("p/b\0"s, end, first->revision, 2);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(Keys(second->values), (std::vector<std::string>{"p/c", "p/d"}));
  EXPECT_TRUE(second->more);
  absl::StatusOr<KvPage> last = store.Range("p/d\0"s, end, first->revision, 2);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(Keys(last->values), (std::vector<std::string>{"p/e"}));
  EXPECT_FALSE(last->more);
  // A page that ends exactly at the range's last key has no more.
  absl::StatusOr<KvPage> exact = store.Range("p/d", end, 0, 2);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(Keys(exact->values), (std::vector<std::string>{"p/d", "p/e"}));
  EXPECT_FALSE(exact->more);
  // No limit: the whole range; an empty range_end: the one key.
  EXPECT_EQ(store.Range("p/", end, 0, 0)->values.size(), 5u);
  EXPECT_EQ(Keys(store.Range("q/a", "", 0, 0)->values), (std::vector<std::string>{"q/a"}));
  // "\0" as range_end: every key from `key` on.
  EXPECT_EQ(Keys(store.Range("p/e", std::string(1, '\0'), 0, 0)->values),
            (std::vector<std::string>{"p/e", "q/a"}));
}

TEST(MemoryKvStoreTest, RangeAtAPastRevisionSeesTheKeysAsTheyWere) {
  MemoryKvStore store;
  const int64_t first = PutKey(store, "p/a", "1");
  PutKey(store, "p/b", "1");
  const int64_t middle = PutKey(store, "p/a", "2");
  DeleteKey(store, "p/b");
  PutKey(store, "p/c", "1");
  const std::string end = KvPrefixEnd("p/");

  absl::StatusOr<KvPage> at_first = store.Range("p/", end, first, 0);
  ASSERT_TRUE(at_first.ok()) << at_first.status();
  ASSERT_EQ(Keys(at_first->values), (std::vector<std::string>{"p/a"}));
  EXPECT_EQ(at_first->values[0].value, "1");
  EXPECT_EQ(at_first->values[0].mod_revision, first);
  // Like etcd's header: the store's revision now, not the one read at.
  EXPECT_EQ(at_first->revision, store.revision());

  absl::StatusOr<KvPage> at_middle = store.Range("p/", end, middle, 0);
  ASSERT_TRUE(at_middle.ok());
  ASSERT_EQ(Keys(at_middle->values), (std::vector<std::string>{"p/a", "p/b"}));
  EXPECT_EQ(at_middle->values[0].value, "2");
  EXPECT_EQ(at_middle->values[0].version, 2);

  EXPECT_EQ(Keys(store.Range("p/", end, 0, 0)->values), (std::vector<std::string>{"p/a", "p/c"}));
  // Paging at a past revision: the limit counts the keys live then.
  absl::StatusOr<KvPage> paged = store.Range("p/", end, middle, 1);
  ASSERT_TRUE(paged.ok());
  EXPECT_EQ(Keys(paged->values), (std::vector<std::string>{"p/a"}));
  EXPECT_TRUE(paged->more);
}

TEST(MemoryKvStoreTest, CompactedRevisionsAreOutOfRangeForRangesAndWatches) {
  MemoryKvStore store;
  const int64_t old_revision = PutKey(store, "p/a", "1");
  PutKey(store, "p/a", "2");
  const int64_t compact_to = PutKey(store, "p/b", "1");
  PutKey(store, "p/c", "1");
  ASSERT_TRUE(store.Compact(compact_to).ok());
  const std::string end = KvPrefixEnd("p/");

  absl::StatusOr<KvPage> too_old = store.Range("p/", end, old_revision, 0);
  EXPECT_EQ(too_old.status().code(), absl::StatusCode::kOutOfRange) << too_old.status();
  EXPECT_EQ(store.Range("p/", end, compact_to - 1, 0).status().code(),
            absl::StatusCode::kOutOfRange);
  absl::StatusOr<KvPage> at_compaction = store.Range("p/", end, compact_to, 0);
  ASSERT_TRUE(at_compaction.ok()) << at_compaction.status();
  EXPECT_EQ(Keys(at_compaction->values), (std::vector<std::string>{"p/a", "p/b"}));
  // Current values stay.
  EXPECT_EQ(Get(store, "p/a")->value, "2");

  KvWatchCancel cancel;
  absl::Status watched = store.Watch(
      "p/", old_revision, [](std::vector<EtcdWatchEvent>) { return true; }, cancel);
  EXPECT_EQ(watched.code(), absl::StatusCode::kOutOfRange) << watched;

  // The future is out of range too; compacting again to an older revision is OK.
  EXPECT_EQ(store.Range("p/", end, store.revision() + 1, 0).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(store.Compact(store.revision() + 1).code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(store.Compact(old_revision).ok());
  EXPECT_TRUE(store.Range("p/", end, compact_to, 0).ok());
}

// etcd keeps the compaction revision itself: a watch from it (what a
// follower that delivered compact_to - 1 asks for) starts, as a range at it does.
TEST(MemoryKvStoreTest, AWatchFromTheCompactionRevisionItselfStartsAsInEtcd) {
  MemoryKvStore store;
  PutKey(store, "p/a", "1");
  const int64_t compact_to = PutKey(store, "p/b", "1");
  ASSERT_TRUE(store.Compact(compact_to).ok());
  WatchRecorder watch(store, "p/", compact_to, /*stop_after_calls=*/1);
  std::optional<absl::Status> ended = watch.AwaitEnd();
  ASSERT_TRUE(ended.has_value());
  EXPECT_TRUE(ended->ok()) << *ended;
  std::vector<std::vector<EtcdWatchEvent>> calls = watch.calls();
  ASSERT_EQ(calls.size(), 1u);
  ASSERT_EQ(calls[0].size(), 1u);
  EXPECT_EQ(calls[0][0].kv.key, "p/b");
}

TEST(MemoryKvStoreTest, AWatchFromAPastRevisionDeliversEachRevisionWholeAndInOrder) {
  MemoryKvStore store;
  std::vector<KvOp> many;
  for (int i = 0; i < 50; ++i) many.push_back(KvOp::Put("p/" + std::to_string(100 + i), "v"));
  many.push_back(KvOp::Put("elsewhere", "v"));
  const int64_t first = store.Txn({}, many, {})->revision;
  const int64_t deleted = DeleteKey(store, "p/100");
  PutKey(store, "elsewhere", "again");  // a revision with nothing under the prefix
  const int64_t last = PutKey(store, "p/200", "v");

  WatchRecorder watch(store, "p/", first, /*stop_after_calls=*/3);
  std::optional<absl::Status> ended = watch.AwaitEnd();
  ASSERT_TRUE(ended.has_value()) << "the watch did not stop after its handler said so";
  EXPECT_TRUE(ended->ok()) << *ended;
  std::vector<std::vector<EtcdWatchEvent>> calls = watch.calls();
  ASSERT_EQ(calls.size(), 3u);
  ASSERT_EQ(calls[0].size(), 50u);  // one call for the whole revision
  for (size_t i = 0; i < calls[0].size(); ++i) {
    EXPECT_FALSE(calls[0][i].deleted);
    EXPECT_EQ(calls[0][i].kv.mod_revision, first);
    EXPECT_EQ(calls[0][i].kv.key, "p/" + std::to_string(100 + i));  // in the txn's order
  }
  ASSERT_EQ(calls[1].size(), 1u);
  EXPECT_TRUE(calls[1][0].deleted);
  EXPECT_EQ(calls[1][0].kv.key, "p/100");
  EXPECT_EQ(calls[1][0].kv.mod_revision, deleted);
  ASSERT_EQ(calls[2].size(), 1u);
  EXPECT_EQ(calls[2][0].kv.key, "p/200");
  EXPECT_EQ(calls[2][0].kv.mod_revision, last);
}

TEST(MemoryKvStoreTest, AWatchWaitsForNewWritesUntilCancelled) {
  MemoryKvStore store;
  WatchRecorder watch(store, "p/", store.revision() + 1);
  const int64_t written = PutKey(store, "p/a", "1");
  ASSERT_TRUE(watch.AwaitCalls(1));
  EXPECT_EQ(watch.calls()[0][0].kv.mod_revision, written);
  EXPECT_FALSE(watch.AwaitEnd(absl::Milliseconds(20)).has_value()) << "the watch ended by itself";
  watch.cancel().Cancel();
  std::optional<absl::Status> ended = watch.AwaitEnd();
  ASSERT_TRUE(ended.has_value()) << "Cancel did not end the watch";
  EXPECT_EQ(ended->code(), absl::StatusCode::kCancelled) << *ended;

  // Cancelled before it starts: it does not start.
  KvWatchCancel cancelled;
  cancelled.Cancel();
  EXPECT_EQ(store
                .Watch(
                    "p/", 1, [](std::vector<EtcdWatchEvent>) { return true; }, cancelled)
                .code(),
            absl::StatusCode::kCancelled);
}

TEST(MemoryKvStoreTest, AnUnreachableStoreFailsEveryCallAndEndsOpenWatches) {
  MemoryKvStore store;
  PutKey(store, "p/a", "1");
  WatchRecorder watch(store, "p/", store.revision() + 1);
  ASSERT_FALSE(watch.AwaitEnd(absl::Milliseconds(20)).has_value());
  const uint64_t errors_before = store.errors();
  store.SetReachable(false);
  std::optional<absl::Status> ended = watch.AwaitEnd();
  ASSERT_TRUE(ended.has_value()) << "the open watch went on while the store was unreachable";
  EXPECT_EQ(ended->code(), absl::StatusCode::kUnavailable) << *ended;

  const KvOp put = KvOp::Put("p/b", "1");
  EXPECT_EQ(store.Txn({}, {&put, 1}, {}).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.Range("p/", KvPrefixEnd("p/"), 0, 0).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.GrantLease(absl::Seconds(5)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.Compact(1).code(), absl::StatusCode::kUnavailable);
  KvWatchCancel cancel;
  EXPECT_EQ(store
                .Watch(
                    "p/", 1, [](std::vector<EtcdWatchEvent>) { return true; }, cancel)
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_GT(store.errors(), errors_before);

  store.SetReachable(true);
  EXPECT_TRUE(store.Txn({}, {&put, 1}, {}).ok());
  EXPECT_EQ(Get(store, "p/a")->value, "1");
}

TEST(MemoryKvStoreTest, FailWritesWithRefusesWritesButNotReads) {
  MemoryKvStore store;
  PutKey(store, "k", "1");
  const int64_t before = store.revision();
  store.FailWritesWith(absl::ResourceExhaustedError("etcdserver: mvcc: database space exceeded"));
  const KvOp put = KvOp::Put("k", "2");
  EXPECT_EQ(store.Txn({}, {&put, 1}, {}).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.Txn({}, {&put, 1}, {}).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Get(store, "k")->value, "1");
  EXPECT_EQ(store.revision(), before);
  store.FailWritesWith(absl::OkStatus());
  EXPECT_TRUE(store.Txn({}, {&put, 1}, {}).ok());
  EXPECT_EQ(Get(store, "k")->value, "2");
}

TEST(MemoryKvStoreTest, AnExpiredLeaseDeletesAllItsKeysInOneRevision) {
  MemoryKvStore store;
  absl::StatusOr<EtcdLease> lease = store.GrantLease(absl::Seconds(5));
  absl::StatusOr<EtcdLease> other = store.GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease.ok() && other.ok());
  EXPECT_NE(lease->id, other->id);
  for (const char* key : {"p/a", "p/b", "p/c"}) PutKey(store, key, "v", lease->id);
  PutKey(store, "p/moved", "v", lease->id);
  PutKey(store, "p/moved", "v", other->id);  // now on the other lease
  PutKey(store, "p/free", "v");
  ASSERT_TRUE(store.KeepAliveOnce(lease->id).ok());

  const int64_t before = store.revision();
  WatchRecorder watch(store, "p/", before + 1);
  store.ExpireLease(lease->id);
  EXPECT_EQ(store.revision(), before + 1);
  ASSERT_TRUE(watch.AwaitCalls(1));
  std::vector<std::vector<EtcdWatchEvent>> calls = watch.calls();
  ASSERT_EQ(calls.size(), 1u);
  std::vector<std::string> deleted;
  for (const EtcdWatchEvent& event : calls[0]) {
    EXPECT_TRUE(event.deleted);
    EXPECT_EQ(event.kv.mod_revision, before + 1);
    deleted.push_back(event.kv.key);
  }
  EXPECT_EQ(deleted, (std::vector<std::string>{"p/a", "p/b", "p/c"}));
  EXPECT_EQ(Keys(store.Range("p/", KvPrefixEnd("p/"), 0, 0)->values),
            (std::vector<std::string>{"p/free", "p/moved"}));

  // Revoking is the same, done by the lease's owner.
  ASSERT_TRUE(store.RevokeLease(other->id).ok());
  EXPECT_FALSE(Get(store, "p/moved").has_value());
}

// A lease that ran out is gone for good, as in etcd: a keep-alive says so
// (that is how a node learns it must register again), and nothing can be
// put on it.
TEST(MemoryKvStoreTest, AnExpiredLeaseStaysGone) {
  MemoryKvStore store;
  absl::StatusOr<EtcdLease> with_keys = store.GrantLease(absl::Seconds(5));
  absl::StatusOr<EtcdLease> without_keys = store.GrantLease(absl::Seconds(5));
  ASSERT_TRUE(with_keys.ok() && without_keys.ok());
  PutKey(store, "p/a", "v", with_keys->id);
  store.ExpireLease(with_keys->id);
  store.ExpireLease(without_keys->id);
  for (int64_t lease : {with_keys->id, without_keys->id}) {
    const KvOp put = KvOp::Put("p/late", "v", lease);
    EXPECT_EQ(store.Txn({}, {&put, 1}, {}).status().code(), absl::StatusCode::kNotFound) << lease;
    EXPECT_EQ(store.KeepAliveOnce(lease).status().code(), absl::StatusCode::kNotFound) << lease;
    EXPECT_EQ(store.RevokeLease(lease).code(), absl::StatusCode::kNotFound) << lease;
  }
  EXPECT_FALSE(Get(store, "p/late").has_value());
}

// Records, for every Range asked of it, how many keys the range spans (not
// how many it returned): what etcd 3.4 walks to answer it.
class RangeWidthRecorder final : public KvStore {
 public:
  explicit RangeWidthRecorder(MemoryKvStore& inner) : inner_(inner) {}
  absl::StatusOr<KvTxnResult> Txn(std::span<const KvCompare> compares,
                                  std::span<const KvOp> success,
                                  std::span<const KvOp> failure) override {
    return inner_.Txn(compares, success, failure);
  }
  absl::StatusOr<KvPage> Range(absl::string_view key, absl::string_view range_end, int64_t revision,
                               int64_t limit) override {
    absl::StatusOr<KvPage> spanned = inner_.Range(key, range_end, revision, 0);
    if (spanned.ok()) widths.push_back(spanned->values.size());
    return inner_.Range(key, range_end, revision, limit);
  }
  absl::StatusOr<std::vector<EtcdKeyValue>> KeysCreatedAt(absl::string_view key,
                                                          absl::string_view range_end,
                                                          int64_t revision) override {
    return inner_.KeysCreatedAt(key, range_end, revision);
  }
  absl::Status Watch(absl::string_view prefix, int64_t start_revision,
                     const WatchHandler& on_events, KvWatchCancel& cancel) override {
    return inner_.Watch(prefix, start_revision, on_events, cancel);
  }
  absl::StatusOr<EtcdLease> GrantLease(absl::Duration ttl) override {
    return inner_.GrantLease(ttl);
  }
  absl::Status RevokeLease(int64_t lease) override { return inner_.RevokeLease(lease); }
  absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease) override {
    return inner_.KeepAliveOnce(lease);
  }
  absl::Status Compact(int64_t revision) override { return inner_.Compact(revision); }
  uint64_t errors() const override { return inner_.errors(); }

  std::vector<size_t> widths;

 private:
  MemoryKvStore& inner_;
};

// A million names used to take minutes to page through: etcd 3.4 walks
// every key from a range's start to its end, whatever the limit, so each
// page of a prefix read cost all the keys after it.
TEST(KvStoreTest, ReadPrefixAsksNoRangeMuchWiderThanAPage) {
  MemoryKvStore memory;
  constexpr int kKeys = 20000;
  constexpr int64_t kPage = 100;
  for (int i = 0; i < kKeys; ++i) PutKey(memory, "p/" + std::to_string(i), "v");
  PutKey(memory, "q/after", "not under p/");
  RangeWidthRecorder store(memory);
  size_t read = 0;
  std::string last;
  bool ordered = true;
  absl::StatusOr<int64_t> revision =
      KvReadPrefix(store, "p/", kPage, [&](std::vector<EtcdKeyValue> page) {
        for (const EtcdKeyValue& kv : page) {
          ordered = ordered && kv.key > last;
          last = kv.key;
        }
        read += page.size();
      });
  ASSERT_TRUE(revision.ok()) << revision.status();
  EXPECT_EQ(read, static_cast<size_t>(kKeys));
  EXPECT_TRUE(ordered);
  // Each page's range used to span every key after it: about n^2/(2 page)
  // keys walked in all (two million here). Windows walk about ten times n (a
  // page ending a subtree widens to the rest of its parent, once per
  // subtree), over a handful of calls per page.
  size_t walked = 0;
  for (size_t width : store.widths) walked += width;
  EXPECT_LE(walked, static_cast<size_t>(15 * kKeys));
  EXPECT_LE(store.widths.size(), static_cast<size_t>(8 * kKeys / kPage));
}

// A page read through windows is the same page: the keys in order, `more`
// while keys follow, as of the revision asked.
TEST(KvStoreTest, RangePageMatchesAPlainRangeAtOneRevision) {
  MemoryKvStore store;
  for (const char* key : {"a/1", "a/10", "a/11", "a/2", "a/3", "a/\xff", "a/\xff\xff", "b/1"}) {
    PutKey(store, key, "v");
  }
  const int64_t revision = store.revision();
  PutKey(store, "a/12", "written after the revision read");
  for (int64_t limit : {1, 2, 3, 5, 100}) {
    std::vector<std::string> paged;
    std::string from = "a/";
    while (true) {
      absl::StatusOr<KvPage> page = KvRangePage(store, from, KvPrefixEnd("a/"), revision, limit);
      ASSERT_TRUE(page.ok()) << page.status();
      ASSERT_LE(page->values.size(), static_cast<size_t>(limit));
      for (const std::string& key : Keys(page->values)) paged.push_back(key);
      if (!page->more || page->values.empty()) break;
      from = page->values.back().key + std::string(1, '\0');
    }
    EXPECT_EQ(paged, (std::vector<std::string>{"a/1", "a/10", "a/11", "a/2", "a/3", "a/\xff",
                                               "a/\xff\xff"}))
        << "limit " << limit;
  }
}

TEST(KvStoreTest, RevisionNowIsTheStoresRevision) {
  MemoryKvStore store;
  PutKey(store, "k", "v");
  PutKey(store, "k", "w");
  absl::StatusOr<int64_t> now = KvRevisionNow(store);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(*now, store.revision());
}

TEST(KvStoreTest, PrefixEndIsTheFirstKeyAfterThePrefix) {
  EXPECT_EQ(KvPrefixEnd("ab"), "ac");
  EXPECT_EQ(KvPrefixEnd("a\xff"), "b");
  EXPECT_EQ(KvPrefixEnd("\xff\xff"), std::string(1, '\0'));
  EXPECT_EQ(KvPrefixEnd("/p/names/"), "/p/names0");
}

TEST(KvStoreTest, ReadPrefixReadsEveryKeyInPages) {
  MemoryKvStore store;
  std::vector<std::string> expected;
  for (int i = 0; i < 7; ++i) {
    expected.push_back("p/" + std::to_string(i));
    PutKey(store, expected.back(), "v");
  }
  PutKey(store, "p0", "not under p/");
  std::vector<size_t> page_sizes;
  std::vector<std::string> keys;
  absl::StatusOr<int64_t> revision =
      KvReadPrefix(store, "p/", 3, [&](std::vector<EtcdKeyValue> page) {
        page_sizes.push_back(page.size());
        for (const std::string& key : Keys(page)) keys.push_back(key);
      });
  ASSERT_TRUE(revision.ok()) << revision.status();
  EXPECT_EQ(*revision, store.revision());
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(page_sizes, (std::vector<size_t>{3, 3, 1}));
  // An empty prefix: no page, the current revision.
  int pages = 0;
  EXPECT_EQ(*KvReadPrefix(store, "none/", 3, [&](std::vector<EtcdKeyValue>) { ++pages; }),
            store.revision());
  EXPECT_EQ(pages, 0);
}

// Writes between pages change nothing read: every page is read at the
// first page's revision, and that revision is returned, so a watch from it
// + 1 sees exactly the writes the pages did not.
TEST(KvStoreTest, ReadPrefixReadsEveryPageAtTheFirstPagesRevision) {
  MemoryKvStore store;
  std::vector<std::string> expected;
  for (int i = 0; i < 7; ++i) {
    expected.push_back("p/" + std::to_string(i));
    PutKey(store, expected.back(), "v");
  }
  const int64_t first_revision = store.revision();
  std::vector<std::string> keys;
  int page = 0;
  absl::StatusOr<int64_t> revision =
      KvReadPrefix(store, "p/", 2, [&](std::vector<EtcdKeyValue> values) {
        for (const std::string& key : Keys(values)) keys.push_back(key);
        // Meanwhile: a key read already goes, one not read yet goes, one is added.
        ++page;
        if (page == 1) DeleteKey(store, "p/0");
        if (page == 2) DeleteKey(store, "p/6");
        PutKey(store, "p/9-" + std::to_string(page), "new");
      });
  ASSERT_TRUE(revision.ok()) << revision.status();
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(*revision, first_revision)
      << "the revision returned is not the one the keys were read at: a watch from it + 1 misses "
         "the writes in between";
}

}  // namespace
}  // namespace tensord
