// RecordCommitter: name records written in group commits. Changes waiting
// while a transaction is in flight share the next one (within etcd's
// --max-txn-ops); each is answered with the revision that ordered it, which
// is the record's origin; an atomic change is all or nothing.
#include "service/cluster/record_committer.h"

#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/cluster/memory_kv_store.h"
#include "service/cluster/name_record.h"
#include "tests/unit/cluster_test_support.h"

namespace tensord {
namespace {

using cluster_test::GatedKvStore;
using cluster_test::PutNameRecord;
using cluster_test::SampleRecord;
using cluster_test::WaitUntil;

constexpr char kPrefix[] = "/t";
using Answer = absl::StatusOr<RecordCommitted>;

RecordChange Write(const std::string& name, uint64_t total_bytes = 64) {
  RecordChange change;
  change.name = name;
  change.record = SampleRecord(name, "node-a", total_bytes);
  return change;
}

RecordChange Remove(const std::string& name) {
  RecordChange change;
  change.name = name;
  return change;
}

Answer CommitNow(RecordCommitter& committer, std::vector<RecordChange> changes) {
  auto answered = std::make_shared<std::promise<Answer>>();
  std::future<Answer> answer = answered->get_future();
  committer.Commit(std::move(changes),
                   [answered](Answer got) { answered->set_value(std::move(got)); });
  if (answer.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return absl::DeadlineExceededError("the commit was not answered");
  }
  return answer.get();
}

std::optional<NameRecord> ReadRecord(KvStore& store, const std::string& name) {
  absl::StatusOr<std::optional<EtcdKeyValue>> kv = KvGet(store, NameRecordKey(kPrefix, name));
  EXPECT_TRUE(kv.ok()) << kv.status();
  if (!kv.ok() || !kv->has_value()) return std::nullopt;
  absl::StatusOr<NameRecord> record = DecodeNameRecord(kPrefix, **kv);
  EXPECT_TRUE(record.ok()) << record.status();
  if (!record.ok()) return std::nullopt;
  return *record;
}

// Collects the answers of many commits issued without waiting.
class AnswerLog {
 public:
  explicit AnswerLog(size_t commits) : answers_(commits, absl::UnknownError("not answered")) {}
  RecordCommitter::Done Collect(size_t index) {
    return [this, index](Answer answer) {
      MutexLock lock(&mu_);
      answers_[index] = std::move(answer);
      ++answered_;
    };
  }
  bool AwaitAll() const {
    return WaitUntil([&] {
      MutexLock lock(&mu_);
      return answered_ == answers_.size();
    });
  }
  size_t answered() const {
    MutexLock lock(&mu_);
    return answered_;
  }
  Answer answer(size_t index) const {
    MutexLock lock(&mu_);
    return answers_[index];
  }

 private:
  mutable Mutex mu_;
  std::vector<Answer> answers_ ABSL_GUARDED_BY(mu_);
  size_t answered_ ABSL_GUARDED_BY(mu_) = 0;
};

// The answer's revision is the record's mod_revision, so readers take it as the origin.
TEST(RecordCommitterTest, ACommitIsAnsweredWithTheRevisionThatIsTheRecordsOrigin) {
  auto store = std::make_shared<MemoryKvStore>();
  RecordCommitter committer(store, RecordCommitterOptions{.prefix = kPrefix});
  for (uint64_t bytes : {10u, 20u}) {
    const Answer committed = CommitNow(committer, {Write("a", bytes)});
    ASSERT_TRUE(committed.ok()) << committed.status();
    EXPECT_FALSE(committed->removed);
    EXPECT_EQ(committed->revision, store->revision());
    std::optional<NameRecord> record = ReadRecord(*store, "a");
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->mod_revision, committed->revision);
    EXPECT_EQ(record->origin, committed->revision);
    EXPECT_EQ(record->total_bytes, bytes);
    EXPECT_EQ(record->holders, (std::vector<std::string>{"node-a"}));
    EXPECT_TRUE(RecordValueOrdersAVersion((*KvGet(*store, NameRecordKey(kPrefix, "a")))->value));
  }
  EXPECT_EQ(committer.transactions(), 2u);
  EXPECT_EQ(committer.changes_committed(), 2u);
}

TEST(RecordCommitterTest, ADeleteSaysWhetherItRemovedARecord) {
  auto store = std::make_shared<MemoryKvStore>();
  PutNameRecord(*store, kPrefix, SampleRecord("a"));
  RecordCommitter committer(store, RecordCommitterOptions{.prefix = kPrefix});
  const Answer removed = CommitNow(committer, {Remove("a")});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(removed->removed);
  EXPECT_EQ(removed->revision, store->revision());
  EXPECT_FALSE(ReadRecord(*store, "a").has_value());

  const Answer again = CommitNow(committer, {Remove("a")});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->removed);
  // An atomic change removing one present record of two says so.
  PutNameRecord(*store, kPrefix, SampleRecord("b"));
  const Answer some = CommitNow(committer, {Remove("a"), Remove("b")});
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_TRUE(some->removed);
}

TEST(RecordCommitterTest, AnAtomicChangeIsOneTransactionWithItsExtraKeys) {
  auto store = std::make_shared<MemoryKvStore>();
  PutNameRecord(*store, kPrefix, SampleRecord("gone"));
  RecordCommitter committer(store, RecordCommitterOptions{.prefix = kPrefix});
  const uint64_t txns_before = store->write_txns();
  std::vector<RecordChange> group = {Write("x"), Write("y"), Remove("gone")};
  group[1].also.push_back(KvOp::Put("/t/groups/g1", "{}"));
  const Answer committed = CommitNow(committer, std::move(group));
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ(store->write_txns(), txns_before + 1);
  EXPECT_EQ(ReadRecord(*store, "x")->origin, committed->revision);
  EXPECT_EQ(ReadRecord(*store, "y")->origin, committed->revision);
  EXPECT_FALSE(ReadRecord(*store, "gone").has_value());
  absl::StatusOr<std::optional<EtcdKeyValue>> group_key = KvGet(*store, "/t/groups/g1");
  ASSERT_TRUE(group_key.ok() && group_key->has_value());
  EXPECT_EQ((*group_key)->mod_revision, committed->revision);
}

TEST(RecordCommitterTest, AChangeLargerThanATransactionIsResourceExhaustedNamingTheLimit) {
  auto store = std::make_shared<MemoryKvStore>();
  RecordCommitter committer(store, RecordCommitterOptions{.prefix = kPrefix, .max_ops_per_txn = 8});
  EXPECT_EQ(committer.max_ops_per_txn(), 8u);
  std::vector<RecordChange> fits;
  for (int i = 0; i < 8; ++i) fits.push_back(Write(absl::StrCat("f", i)));
  ASSERT_TRUE(CommitNow(committer, std::move(fits)).ok());

  std::vector<RecordChange> too_many;
  for (int i = 0; i < 9; ++i) too_many.push_back(Write(absl::StrCat("t", i)));
  const int64_t before = store->revision();
  Answer refused = CommitNow(committer, std::move(too_many));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("9 etcd keys"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("(8,"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("--etcd-max-txn-ops"), std::string::npos);
  EXPECT_EQ(store->revision(), before);
  EXPECT_FALSE(ReadRecord(*store, "t0").has_value());

  // Extra keys count: 5 records and 4 extra keys are 9 keys.
  std::vector<RecordChange> with_extras;
  for (int i = 0; i < 5; ++i) with_extras.push_back(Write(absl::StrCat("e", i)));
  for (int i = 0; i < 4; ++i) with_extras[0].also.push_back(KvOp::Put(absl::StrCat("/t/x", i), ""));
  refused = CommitNow(committer, std::move(with_extras));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(store->revision(), before);
}

TEST(RecordCommitterTest, ANameGivenTwiceInOneChangeIsRefused) {
  auto store = std::make_shared<MemoryKvStore>();
  RecordCommitter committer(store, RecordCommitterOptions{.prefix = kPrefix});
  const Answer refused = CommitNow(committer, {Write("a"), Remove("a")});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("'a'"), std::string::npos);
  EXPECT_EQ(store->write_txns(), 0u);
  const Answer nothing = CommitNow(committer, {});
  ASSERT_TRUE(nothing.ok());
  EXPECT_EQ(store->write_txns(), 0u);
}

TEST(RecordCommitterTest, StoreFailuresAreEveryChangesAnswerAndWriteNothing) {
  auto store = std::make_shared<MemoryKvStore>();
  RecordCommitter committer(store, RecordCommitterOptions{.prefix = kPrefix});
  store->SetReachable(false);
  EXPECT_EQ(CommitNow(committer, {Write("a")}).status().code(), absl::StatusCode::kUnavailable);
  store->SetReachable(true);
  store->FailWritesWith(absl::ResourceExhaustedError("etcdserver: mvcc: database space exceeded"));
  const Answer full = CommitNow(committer, {Write("a"), Write("b")});
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  EXPECT_EQ(CommitNow(committer, {Remove("a")}).status().code(),
            absl::StatusCode::kResourceExhausted);
  store->FailWritesWith(absl::OkStatus());
  EXPECT_FALSE(ReadRecord(*store, "a").has_value());
  EXPECT_EQ(committer.changes_committed(), 0u);
  EXPECT_TRUE(CommitNow(committer, {Write("a")}).ok());
}

// Changes that wait while one transaction is in flight share the next.
TEST(RecordCommitterTest, ChangesWaitingBehindATransactionShareTheNext) {
  auto memory = std::make_shared<MemoryKvStore>();
  auto gated = std::make_shared<GatedKvStore>(memory);
  RecordCommitter committer(gated, RecordCommitterOptions{.prefix = kPrefix, .threads = 1});
  gated->Close();
  AnswerLog log(101);
  committer.Commit({Write("first")}, log.Collect(100));
  ASSERT_TRUE(gated->AwaitWaiting(1));
  for (size_t i = 0; i < 100; ++i) committer.Commit({Write(absl::StrCat("n", i))}, log.Collect(i));
  gated->Open();
  ASSERT_TRUE(log.AwaitAll()) << log.answered() << " of 101 commits answered";
  EXPECT_EQ(memory->write_txns(), 2u);
  EXPECT_EQ(committer.transactions(), 2u);
  EXPECT_EQ(committer.changes_committed(), 101u);
  for (size_t i = 0; i < 100; ++i) {
    const Answer answer = log.answer(i);
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->revision, ReadRecord(*memory, absl::StrCat("n", i))->origin);
  }
  EXPECT_LT(log.answer(100)->revision, log.answer(0)->revision);
}

// Shared transactions stay within max_ops_per_txn keys, whole changes each.
TEST(RecordCommitterTest, SharedTransactionsHoldAtMostMaxOpsKeys) {
  auto memory = std::make_shared<MemoryKvStore>();
  auto gated = std::make_shared<GatedKvStore>(memory);
  RecordCommitter committer(
      gated, RecordCommitterOptions{.prefix = kPrefix, .max_ops_per_txn = 10, .threads = 1});
  gated->Close();
  AnswerLog log(1 + 24);
  committer.Commit({Write("first")}, log.Collect(0));
  ASSERT_TRUE(gated->AwaitWaiting(1));
  // Twenty-four single puts: ten fit a transaction of ten keys.
  for (size_t i = 0; i < 24; ++i) {
    committer.Commit({Write(absl::StrCat("n", i))}, log.Collect(1 + i));
  }
  gated->Open();
  ASSERT_TRUE(log.AwaitAll());
  EXPECT_EQ(memory->write_txns(), 1u + 3u);
  for (size_t i = 0; i < 24; ++i) {
    ASSERT_TRUE(log.answer(1 + i).ok()) << log.answer(1 + i).status();
  }
}

// An atomic group is a transaction of its own, so the revision a watch
// reports for it holds exactly that group, all or nothing.
TEST(RecordCommitterTest, AnAtomicGroupIsATransactionOfItsOwn) {
  auto memory = std::make_shared<MemoryKvStore>();
  auto gated = std::make_shared<GatedKvStore>(memory);
  RecordCommitter committer(
      gated, RecordCommitterOptions{.prefix = kPrefix, .max_ops_per_txn = 10, .threads = 1});
  gated->Close();
  AnswerLog log(1 + 3 + 2);
  committer.Commit({Write("first")}, log.Collect(0));
  ASSERT_TRUE(gated->AwaitWaiting(1));
  for (size_t i = 0; i < 3; ++i) {
    committer.Commit(
        {Write(absl::StrCat("a", i)), Write(absl::StrCat("b", i)), Write(absl::StrCat("c", i))},
        log.Collect(1 + i));
  }
  committer.Commit({Write("single0")}, log.Collect(4));
  committer.Commit({Write("single1")}, log.Collect(5));
  gated->Open();
  ASSERT_TRUE(log.AwaitAll());
  // first, three groups alone, the two singles together.
  EXPECT_EQ(memory->write_txns(), 1u + 3u + 1u);
  for (size_t i = 0; i < 3; ++i) {
    const Answer answer = log.answer(1 + i);
    ASSERT_TRUE(answer.ok()) << answer.status();
    for (const char* letter : {"a", "b", "c"}) {
      EXPECT_EQ(ReadRecord(*memory, absl::StrCat(letter, i))->origin, answer->revision);
    }
  }
  ASSERT_TRUE(log.answer(4).ok());
  ASSERT_TRUE(log.answer(5).ok());
  EXPECT_EQ(log.answer(4)->revision, log.answer(5)->revision);
  EXPECT_NE(log.answer(1)->revision, log.answer(2)->revision);
}

// An atomic group of one item (its record names the group) is alone in its
// transaction too: a revision holds at most one group, which is how a
// group is found again by the revision that ordered it.
TEST(RecordCommitterTest, AOneItemGroupIsATransactionOfItsOwn) {
  auto memory = std::make_shared<MemoryKvStore>();
  auto gated = std::make_shared<GatedKvStore>(memory);
  RecordCommitter committer(
      gated, RecordCommitterOptions{.prefix = kPrefix, .max_ops_per_txn = 10, .threads = 1});
  gated->Close();
  AnswerLog log(4);
  committer.Commit({Write("first")}, log.Collect(0));
  ASSERT_TRUE(gated->AwaitWaiting(1));
  RecordChange grouped = Write("grouped");
  grouped.record->group = "node-a.g1";
  committer.Commit({Write("single0")}, log.Collect(1));
  committer.Commit({std::move(grouped)}, log.Collect(2));
  committer.Commit({Write("single1")}, log.Collect(3));
  gated->Open();
  ASSERT_TRUE(log.AwaitAll());
  for (size_t i = 0; i < 4; ++i) ASSERT_TRUE(log.answer(i).ok()) << log.answer(i).status();
  EXPECT_NE(log.answer(2)->revision, log.answer(1)->revision);
  EXPECT_NE(log.answer(2)->revision, log.answer(3)->revision);
  EXPECT_EQ(log.answer(1)->revision, log.answer(3)->revision);
}

// Two changes of one name never share a transaction (etcd refuses a key
// written twice), and the later one is ordered later.
TEST(RecordCommitterTest, TwoChangesOfOneNameAreOrderedInTheOrderAsked) {
  auto memory = std::make_shared<MemoryKvStore>();
  auto gated = std::make_shared<GatedKvStore>(memory);
  RecordCommitter committer(gated, RecordCommitterOptions{.prefix = kPrefix, .threads = 1});
  gated->Close();
  AnswerLog log(4);
  committer.Commit({Write("first")}, log.Collect(0));
  ASSERT_TRUE(gated->AwaitWaiting(1));
  committer.Commit({Write("n", 1)}, log.Collect(1));
  committer.Commit({Write("other")}, log.Collect(2));
  committer.Commit({Write("n", 2)}, log.Collect(3));
  gated->Open();
  ASSERT_TRUE(log.AwaitAll());
  for (size_t i = 0; i < 4; ++i) ASSERT_TRUE(log.answer(i).ok()) << log.answer(i).status();
  EXPECT_EQ(log.answer(1)->revision, log.answer(2)->revision);
  EXPECT_LT(log.answer(1)->revision, log.answer(3)->revision);
  std::optional<NameRecord> record = ReadRecord(*memory, "n");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->total_bytes, 2u);
  EXPECT_EQ(record->origin, log.answer(3)->revision);
}

// The destructor answers what still waits UNAVAILABLE (nothing written),
// after the transaction in flight finished.
TEST(RecordCommitterTest, DestructionAnswersWhatWaits) {
  auto memory = std::make_shared<MemoryKvStore>();
  auto gated = std::make_shared<GatedKvStore>(memory);
  auto committer = std::make_unique<RecordCommitter>(
      gated, RecordCommitterOptions{.prefix = kPrefix, .threads = 1});
  gated->Close();
  AnswerLog log(3);
  committer->Commit({Write("in-flight")}, log.Collect(0));
  ASSERT_TRUE(gated->AwaitWaiting(1));
  committer->Commit({Write("waiting-1")}, log.Collect(1));
  committer->Commit({Remove("in-flight")}, log.Collect(2));
  // The committer's one thread is held in the store: the gate opens once
  // the destructor has had time to take the queue.
  std::thread opener([&] {
    absl::SleepFor(absl::Milliseconds(100));
    gated->Open();
  });
  committer.reset();
  opener.join();
  ASSERT_EQ(log.answered(), 3u) << "the destructor returned with commits unanswered";
  EXPECT_TRUE(log.answer(0).ok()) << log.answer(0).status();
  EXPECT_EQ(log.answer(1).status().code(), absl::StatusCode::kUnavailable)
      << log.answer(1).status();
  EXPECT_EQ(log.answer(2).status().code(), absl::StatusCode::kUnavailable)
      << log.answer(2).status();
  EXPECT_TRUE(ReadRecord(*memory, "in-flight").has_value());
  EXPECT_FALSE(ReadRecord(*memory, "waiting-1").has_value());
}

}  // namespace
}  // namespace tensord
