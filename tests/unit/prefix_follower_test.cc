// PrefixFollower: reads a prefix (or notes where it starts), then follows
// its events; resumes a broken watch after the last revision it delivered,
// and reads again (or reports the gap) when etcd compacted what it needed.
#include "service/cluster/prefix_follower.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/cluster/memory_kv_store.h"
#include "service/common/mutex.h"
#include "tests/unit/cluster_test_support.h"

namespace tensord {
namespace {

using cluster_test::DeleteKey;
using cluster_test::PutKey;
using cluster_test::WaitUntil;

constexpr absl::Duration kPatience = absl::Seconds(10);

struct Read {
  std::vector<std::string> keys;
  int64_t revision = 0;
};

struct Gap {
  int64_t missed_after = 0;
  int64_t resumed_at = 0;
  bool operator==(const Gap&) const = default;
};

// One event as a test compares it: "put KEY@REV" or "delete KEY@REV".
std::string Describe(const EtcdWatchEvent& event) {
  return (event.deleted ? "delete " : "put ") + event.kv.key + "@" +
         std::to_string(event.kv.mod_revision);
}

std::string Put(const std::string& key, int64_t revision) {
  return "put " + key + "@" + std::to_string(revision);
}

std::string Deleted(const std::string& key, int64_t revision) {
  return "delete " + key + "@" + std::to_string(revision);
}

// Records what a follower delivers. An event for `hold_at_key` holds the
// follower's thread inside on_events until Release() (or the patience runs
// out), so a test can write and compact while the follower lags.
class FollowerLog {
 public:
  explicit FollowerLog(std::string hold_at_key = "") : hold_at_key_(std::move(hold_at_key)) {}

  PrefixFollowerCallbacks Callbacks() {
    return PrefixFollowerCallbacks{
        .on_read =
            [this](std::vector<EtcdKeyValue> keys, int64_t revision) {
              Read read;
              read.revision = revision;
              for (const EtcdKeyValue& kv : keys) read.keys.push_back(kv.key);
              MutexLock lock(&mu_);
              reads_.push_back(std::move(read));
            },
        .on_gap =
            [this](int64_t missed_after, int64_t resumed_at) {
              MutexLock lock(&mu_);
              gaps_.push_back(Gap{missed_after, resumed_at});
            },
        .on_events =
            [this](std::vector<EtcdWatchEvent> events) {
              bool hold = false;
              {
                MutexLock lock(&mu_);
                std::vector<std::string> call;
                for (const EtcdWatchEvent& event : events) {
                  call.push_back(Describe(event));
                  events_.push_back(Describe(event));
                  hold = hold || (!hold_at_key_.empty() && event.kv.key == hold_at_key_);
                }
                calls_.push_back(std::move(call));
                if (!hold) return;
                holding_ = true;
                const absl::Time deadline = absl::Now() + kPatience;
                while (!released_ && absl::Now() < deadline) {
                  released_cv_.WaitWithTimeout(&mu_, deadline - absl::Now());
                }
                holding_ = false;
              }
            }};
  }

  bool AwaitHolding() const {
    return WaitUntil([&] {
      MutexLock lock(&mu_);
      return holding_;
    });
  }
  void Release() {
    MutexLock lock(&mu_);
    released_ = true;
    released_cv_.SignalAll();
  }
  std::vector<Read> reads() const {
    MutexLock lock(&mu_);
    return reads_;
  }
  std::vector<Gap> gaps() const {
    MutexLock lock(&mu_);
    return gaps_;
  }
  std::vector<std::string> events() const {
    MutexLock lock(&mu_);
    return events_;
  }
  std::vector<std::vector<std::string>> calls() const {
    MutexLock lock(&mu_);
    return calls_;
  }

 private:
  const std::string hold_at_key_;
  mutable Mutex mu_;
  CondVar released_cv_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Read> reads_ ABSL_GUARDED_BY(mu_);
  std::vector<Gap> gaps_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<std::string>> calls_ ABSL_GUARDED_BY(mu_);
};

TEST(PrefixFollowerTest, ReadsTheKeysFirstThenDeliversEachLaterRevisionInOrder) {
  auto store = std::make_shared<MemoryKvStore>();
  PutKey(*store, "p/a", "1");
  PutKey(*store, "p/b", "1");
  PutKey(*store, "q/a", "1");
  const int64_t read_at = store->revision();
  FollowerLog log;
  PrefixFollower follower(store, "p/", /*read_first=*/true, "test keys", log.Callbacks());
  EXPECT_EQ(follower.revision(), 0);
  EXPECT_FALSE(follower.health().ok());
  follower.Start();
  ASSERT_TRUE(follower.AwaitRevision(read_at, kPatience));
  EXPECT_TRUE(follower.health().ok()) << follower.health();
  std::vector<Read> reads = log.reads();
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].keys, (std::vector<std::string>{"p/a", "p/b"}));
  EXPECT_EQ(reads[0].revision, read_at);

  const std::vector<KvOp> two = {KvOp::Put("p/c", "1"), KvOp::Put("p/d", "1")};
  const int64_t both = store->Txn({}, two, {})->revision;
  PutKey(*store, "q/b", "1");
  const int64_t removed = DeleteKey(*store, "p/a");
  ASSERT_TRUE(follower.AwaitRevision(removed, kPatience));
  EXPECT_EQ(log.calls(), (std::vector<std::vector<std::string>>{
                             {Put("p/c", both), Put("p/d", both)}, {Deleted("p/a", removed)}}));
  EXPECT_EQ(log.reads().size(), 1u);
  EXPECT_TRUE(log.gaps().empty());
}

// etcd compacted revisions the follower had not delivered yet: it reads
// the prefix again (on_read a second time) and goes on from there.
TEST(PrefixFollowerTest, ReadsAgainAfterACompactionPastWhatItDelivered) {
  auto store = std::make_shared<MemoryKvStore>();
  PutKey(*store, "p/a", "1");
  FollowerLog log(/*hold_at_key=*/"p/hold");
  PrefixFollower follower(store, "p/", /*read_first=*/true, "test keys", log.Callbacks());
  follower.Start();
  ASSERT_TRUE(follower.AwaitRevision(store->revision(), kPatience));

  const int64_t held_at = PutKey(*store, "p/hold", "1");
  ASSERT_TRUE(log.AwaitHolding());
  // While it lags: changes, then their history compacted away.
  PutKey(*store, "p/b", "1");
  DeleteKey(*store, "p/a");
  const int64_t compacted_to = PutKey(*store, "p/c", "1");
  PutKey(*store, "q/unrelated", "1");
  ASSERT_TRUE(store->Compact(compacted_to).ok());
  log.Release();

  ASSERT_TRUE(WaitUntil([&] { return log.reads().size() == 2; })) << "no second read";
  std::vector<Read> reads = log.reads();
  EXPECT_EQ(reads[1].keys, (std::vector<std::string>{"p/b", "p/c", "p/hold"}));
  EXPECT_EQ(reads[1].revision, store->revision());
  const int64_t later = PutKey(*store, "p/d", "1");
  ASSERT_TRUE(follower.AwaitRevision(later, kPatience));
  // The compacted revisions came through the read, not as events.
  EXPECT_EQ(log.events(), (std::vector<std::string>{Put("p/hold", held_at), Put("p/d", later)}));
  EXPECT_TRUE(log.gaps().empty());
}

// Without read_first the follower says where it starts and, after a
// compaction, which revisions it did not see.
TEST(PrefixFollowerTest, WithoutReadFirstReportsTheGapAfterACompaction) {
  auto store = std::make_shared<MemoryKvStore>();
  PutKey(*store, "p/a", "1");
  const int64_t started_at = store->revision();
  FollowerLog log(/*hold_at_key=*/"p/hold");
  PrefixFollower follower(store, "p/", /*read_first=*/false, "test keys", log.Callbacks());
  follower.Start();
  ASSERT_TRUE(WaitUntil([&] { return !log.gaps().empty(); }));
  EXPECT_EQ(log.gaps()[0], (Gap{0, started_at}));
  EXPECT_TRUE(log.reads().empty());

  const int64_t held_at = PutKey(*store, "p/hold", "1");
  ASSERT_TRUE(log.AwaitHolding());
  PutKey(*store, "p/b", "1");
  const int64_t compacted_to = PutKey(*store, "p/c", "1");
  ASSERT_TRUE(store->Compact(compacted_to).ok());
  log.Release();

  ASSERT_TRUE(WaitUntil([&] { return log.gaps().size() == 2; })) << "the gap was not reported";
  EXPECT_EQ(log.gaps()[1], (Gap{held_at, compacted_to}));
  const int64_t later = PutKey(*store, "p/d", "1");
  ASSERT_TRUE(follower.AwaitRevision(later, kPatience));
  EXPECT_EQ(log.events(), (std::vector<std::string>{Put("p/hold", held_at), Put("p/d", later)}));
}

// Cut off from the store and back: the watch resumes after the last
// revision delivered, so what changed meanwhile (a lease that ran out) is
// delivered, without a second read.
TEST(PrefixFollowerTest, ResumesAfterTheStoreWasUnreachableWithoutLosingEvents) {
  auto store = std::make_shared<MemoryKvStore>();
  absl::StatusOr<EtcdLease> lease = store->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease.ok());
  PutKey(*store, "p/leased-1", "1", lease->id);
  PutKey(*store, "p/leased-2", "1", lease->id);
  FollowerLog log;
  PrefixFollower follower(store, "p/", /*read_first=*/true, "test keys", log.Callbacks());
  follower.Start();
  ASSERT_TRUE(follower.AwaitRevision(store->revision(), kPatience));
  const int64_t before = PutKey(*store, "p/before", "1");
  ASSERT_TRUE(follower.AwaitRevision(before, kPatience));

  store->SetReachable(false);
  ASSERT_TRUE(WaitUntil([&] { return !follower.health().ok(); }));
  EXPECT_EQ(follower.health().code(), absl::StatusCode::kUnavailable) << follower.health();
  store->ExpireLease(lease->id);  // etcd's clock runs on without the node
  const int64_t expired = store->revision();
  store->SetReachable(true);
  const int64_t after = PutKey(*store, "p/after", "1");

  ASSERT_TRUE(follower.AwaitRevision(after, kPatience));
  EXPECT_EQ(log.calls(), (std::vector<std::vector<std::string>>{
                             {Put("p/before", before)},
                             {Deleted("p/leased-1", expired), Deleted("p/leased-2", expired)},
                             {Put("p/after", after)}}));
  EXPECT_EQ(log.reads().size(), 1u);
  EXPECT_TRUE(follower.health().ok()) << follower.health();
}

// health() is OK while the follower is current: once the store is back and
// the watch runs again, also on a prefix where nothing changed meanwhile.
TEST(PrefixFollowerTest, HealthIsOkAgainOnceTheWatchResumesOnAQuietPrefix) {
  auto store = std::make_shared<MemoryKvStore>();
  PutKey(*store, "p/a", "1");
  FollowerLog log;
  PrefixFollower follower(store, "p/", /*read_first=*/true, "test keys", log.Callbacks());
  follower.Start();
  ASSERT_TRUE(follower.AwaitRevision(store->revision(), kPatience));
  ASSERT_TRUE(follower.health().ok());
  store->SetReachable(false);
  ASSERT_TRUE(WaitUntil([&] { return !follower.health().ok(); }));
  store->SetReachable(true);
  // The first retry comes within the follower's backoff (50 ms at first).
  EXPECT_TRUE(WaitUntil([&] { return follower.health().ok(); }, absl::Seconds(3)))
      << "still " << follower.health() << " with the store reachable again";
  // It does follow: a change is delivered.
  const int64_t later = PutKey(*store, "p/b", "1");
  EXPECT_TRUE(follower.AwaitRevision(later, kPatience));
}

TEST(PrefixFollowerTest, StopEndsAWatchThatWaitsAndAwaitRevisionReturns) {
  auto store = std::make_shared<MemoryKvStore>();
  FollowerLog log;
  PrefixFollower follower(store, "p/", /*read_first=*/true, "test keys", log.Callbacks());
  follower.Start();
  ASSERT_TRUE(follower.AwaitRevision(store->revision(), kPatience));
  EXPECT_FALSE(follower.AwaitRevision(store->revision() + 1, absl::Milliseconds(20)));
  const absl::Time stopping = absl::Now();
  follower.Stop();
  EXPECT_LT(absl::Now() - stopping, absl::Seconds(2));
  // Nothing is delivered after Stop.
  PutKey(*store, "p/late", "1");
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_TRUE(log.events().empty());
}

}  // namespace
}  // namespace tensord
