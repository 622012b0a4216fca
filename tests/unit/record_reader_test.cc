// RecordReader: linearizable reads of name records, where reads asked for
// while a transaction is in flight share the next one; each caller gets
// one answer per name, in its order, and a broken store or a bad record
// fails only what it touches.
#include "service/cluster/record_reader.h"

#include <atomic>
#include <future>
#include <memory>
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
using cluster_test::PutKey;
using cluster_test::PutNameRecord;
using cluster_test::SampleRecord;
using cluster_test::WaitUntil;

constexpr char kPrefix[] = "/t";
using Answers = std::vector<RecordReader::Answer>;

// Reads `names` and waits (bounded) for the answers.
Answers ReadNow(RecordReader& reader, std::vector<std::string> names) {
  auto answered = std::make_shared<std::promise<Answers>>();
  std::future<Answers> answers = answered->get_future();
  reader.Read(std::move(names), [answered](Answers got) { answered->set_value(std::move(got)); });
  if (answers.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "the read was not answered";
    return {};
  }
  return answers.get();
}

// Collects the answers of many reads issued without waiting.
class AnswerLog {
 public:
  RecordReader::Done Collect(size_t index) {
    return [this, index](Answers answers) {
      MutexLock lock(&mu_);
      answers_[index] = std::move(answers);
      ++answered_;
    };
  }
  explicit AnswerLog(size_t reads) : answers_(reads) {}
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
  Answers answers(size_t index) const {
    MutexLock lock(&mu_);
    return answers_[index];
  }

 private:
  mutable Mutex mu_;
  std::vector<Answers> answers_ ABSL_GUARDED_BY(mu_);
  size_t answered_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(RecordReaderTest, AnswersEachNameInOrderWithItsRecordOrNone) {
  auto store = std::make_shared<MemoryKvStore>();
  const int64_t a_origin = PutNameRecord(*store, kPrefix, SampleRecord("a", "node-a", 10));
  const int64_t b_origin = PutNameRecord(*store, kPrefix, SampleRecord("b", "node-b", 20));
  RecordReader reader(store, RecordReaderOptions{.prefix = kPrefix});

  const Answers answers = ReadNow(reader, {"b", "missing", "a", "b"});
  ASSERT_EQ(answers.size(), 4u);
  for (const RecordReader::Answer& answer : answers) ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_TRUE(answers[0]->has_value());
  EXPECT_EQ((*answers[0])->name, "b");
  EXPECT_EQ((*answers[0])->writer, "node-b");
  EXPECT_EQ((*answers[0])->total_bytes, 20u);
  EXPECT_EQ((*answers[0])->origin, b_origin);
  EXPECT_FALSE(answers[1]->has_value());
  ASSERT_TRUE(answers[2]->has_value());
  EXPECT_EQ((*answers[2])->name, "a");
  EXPECT_EQ((*answers[2])->origin, a_origin);
  // A name asked twice gets the same record twice, read once.
  ASSERT_TRUE(answers[3]->has_value());
  EXPECT_EQ(**answers[3], **answers[0]);
  EXPECT_EQ(reader.names_read(), 3u);
  EXPECT_EQ(reader.transactions(), 1u);

  EXPECT_TRUE(ReadNow(reader, {}).empty());
}

// Linearizable: a read asked after a write was acknowledged sees it.
TEST(RecordReaderTest, SeesEveryWriteMadeBeforeItWasAsked) {
  auto store = std::make_shared<MemoryKvStore>();
  RecordReader reader(store, RecordReaderOptions{.prefix = kPrefix});
  for (uint64_t bytes = 1; bytes <= 20; ++bytes) {
    const int64_t origin = PutNameRecord(*store, kPrefix, SampleRecord("n", "node-a", bytes));
    const Answers answers = ReadNow(reader, {"n"});
    ASSERT_EQ(answers.size(), 1u);
    ASSERT_TRUE(answers[0].ok() && answers[0]->has_value());
    EXPECT_EQ((*answers[0])->total_bytes, bytes);
    EXPECT_EQ((*answers[0])->origin, origin);
  }
  cluster_test::DeleteKey(*store, NameRecordKey(kPrefix, "n"));
  const Answers answers = ReadNow(reader, {"n"});
  ASSERT_TRUE(answers[0].ok());
  EXPECT_FALSE(answers[0]->has_value());
}

TEST(RecordReaderTest, AnUndecodableRecordFailsOnlyItsName) {
  auto store = std::make_shared<MemoryKvStore>();
  PutNameRecord(*store, kPrefix, SampleRecord("a"));
  PutKey(*store, NameRecordKey(kPrefix, "bad"), "{not json");
  PutNameRecord(*store, kPrefix, SampleRecord("c"));
  RecordReader reader(store, RecordReaderOptions{.prefix = kPrefix});

  const Answers answers = ReadNow(reader, {"a", "bad", "c"});
  ASSERT_EQ(answers.size(), 3u);
  ASSERT_TRUE(answers[0].ok() && answers[0]->has_value());
  EXPECT_EQ(answers[1].status().code(), absl::StatusCode::kDataLoss) << answers[1].status();
  EXPECT_NE(answers[1].status().message().find(NameRecordKey(kPrefix, "bad")), std::string::npos)
      << answers[1].status();
  ASSERT_TRUE(answers[2].ok() && answers[2]->has_value());
  EXPECT_EQ((*answers[2])->name, "c");
}

TEST(RecordReaderTest, AnUnreachableStoreIsUnavailableForEveryNameNamingIt) {
  auto store = std::make_shared<MemoryKvStore>();
  PutNameRecord(*store, kPrefix, SampleRecord("a"));
  RecordReader reader(store, RecordReaderOptions{.prefix = kPrefix});
  store->SetReachable(false);
  const Answers answers = ReadNow(reader, {"a", "b"});
  ASSERT_EQ(answers.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(answers[i].status().code(), absl::StatusCode::kUnavailable) << answers[i].status();
    EXPECT_NE(answers[i].status().message().find(i == 0 ? "'a'" : "'b'"), std::string::npos)
        << answers[i].status();
  }
  store->SetReachable(true);
  const Answers again = ReadNow(reader, {"a"});
  ASSERT_TRUE(again[0].ok() && again[0]->has_value());
}

// Reads asked while one transaction is in flight share the next: a
// hundred callers pay one more etcd round trip, not a hundred.
TEST(RecordReaderTest, ReadsWaitingBehindATransactionShareTheNext) {
  auto memory = std::make_shared<MemoryKvStore>();
  for (int i = 0; i < 100; ++i) PutNameRecord(*memory, kPrefix, SampleRecord(absl::StrCat("n", i)));
  auto gated = std::make_shared<GatedKvStore>(memory);
  RecordReader reader(gated, RecordReaderOptions{.prefix = kPrefix, .threads = 1});

  gated->Close();
  AnswerLog log(101);
  reader.Read({"n0"}, log.Collect(100));
  ASSERT_TRUE(gated->AwaitWaiting(1));
  for (size_t i = 0; i < 100; ++i) reader.Read({absl::StrCat("n", 99 - i)}, log.Collect(i));
  gated->Open();
  ASSERT_TRUE(log.AwaitAll()) << log.answered() << " of 101 reads answered";
  EXPECT_EQ(reader.transactions(), 2u);
  for (size_t i = 0; i < 100; ++i) {
    const Answers answers = log.answers(i);
    ASSERT_EQ(answers.size(), 1u);
    ASSERT_TRUE(answers[0].ok() && answers[0]->has_value()) << i;
    EXPECT_EQ((*answers[0])->name, absl::StrCat("n", 99 - i));
  }
}

TEST(RecordReaderTest, ATransactionReadsAtMostMaxNamesAndRepeatsCostNothing) {
  auto memory = std::make_shared<MemoryKvStore>();
  auto gated = std::make_shared<GatedKvStore>(memory);
  RecordReader reader(
      gated, RecordReaderOptions{.prefix = kPrefix, .max_names_per_txn = 10, .threads = 1});
  gated->Close();
  AnswerLog log(1 + 25 + 40);
  reader.Read({"first"}, log.Collect(0));
  ASSERT_TRUE(gated->AwaitWaiting(1));
  // 40 reads of 2 names, then 25 distinct names (those 2 among them): the
  // repeats ride along in the first transaction, which holds 10 names; the
  // rest take two more.
  for (size_t i = 0; i < 40; ++i) reader.Read({absl::StrCat("d", i % 2)}, log.Collect(1 + i));
  for (size_t i = 0; i < 25; ++i) reader.Read({absl::StrCat("d", i)}, log.Collect(41 + i));
  gated->Open();
  ASSERT_TRUE(log.AwaitAll());
  EXPECT_EQ(reader.transactions(), 1u + 3u);
  EXPECT_EQ(reader.names_read(), 1u + 25u);
  for (size_t i = 0; i < 65; ++i) {
    const Answers answers = log.answers(1 + i);
    ASSERT_EQ(answers.size(), 1u);
    ASSERT_TRUE(answers[0].ok()) << answers[0].status();
    EXPECT_FALSE(answers[0]->has_value());
  }
}

// One read of more names than a transaction holds: split, answered once, in order.
TEST(RecordReaderTest, ALargeReadIsSplitAcrossTransactionsAndAnsweredOnce) {
  auto store = std::make_shared<MemoryKvStore>();
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) {
    names.push_back(absl::StrCat("n", i));
    if (i % 3 == 0) PutNameRecord(*store, kPrefix, SampleRecord(names.back(), "node-a", i + 1));
  }
  RecordReader reader(store, RecordReaderOptions{.prefix = kPrefix, .max_names_per_txn = 128});
  auto answered = std::make_shared<std::atomic<int>>(0);
  auto done = std::make_shared<std::promise<Answers>>();
  std::future<Answers> future = done->get_future();
  reader.Read(names, [answered, done](Answers answers) {
    if (answered->fetch_add(1) == 0) done->set_value(std::move(answers));
  });
  ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const Answers answers = future.get();
  EXPECT_EQ(answered->load(), 1);
  ASSERT_EQ(answers.size(), 300u);
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(answers[i].ok()) << answers[i].status();
    ASSERT_EQ(answers[i]->has_value(), i % 3 == 0) << i;
    if (i % 3 == 0) {
      EXPECT_EQ((*answers[i])->total_bytes, static_cast<uint64_t>(i + 1));
    }
  }
  EXPECT_GE(reader.transactions(), 3u);
  EXPECT_EQ(reader.names_read(), 300u);
}

// Many threads reading at once (4 reader threads, a slow store): the
// transactions stay far fewer than the reads, and every read is answered.
TEST(RecordReaderTest, ConcurrentReadersShareTransactions) {
  auto memory = std::make_shared<MemoryKvStore>();
  for (int i = 0; i < 16; ++i) PutNameRecord(*memory, kPrefix, SampleRecord(absl::StrCat("n", i)));
  auto gated = std::make_shared<GatedKvStore>(memory);
  RecordReader reader(gated, RecordReaderOptions{.prefix = kPrefix, .threads = 4});
  constexpr size_t kThreads = 8;
  constexpr size_t kReadsPerThread = 50;
  AnswerLog log(kThreads * kReadsPerThread);
  gated->Close();
  std::vector<std::thread> callers;
  for (size_t t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (size_t i = 0; i < kReadsPerThread; ++i) {
        reader.Read({absl::StrCat("n", (t + i) % 16), "missing"},
                    log.Collect(t * kReadsPerThread + i));
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  // Whatever the reader threads took before the gate opened waits there.
  ASSERT_TRUE(WaitUntil([&] { return gated->waiting() >= 1; }));
  gated->Open();
  ASSERT_TRUE(log.AwaitAll());
  // At most one transaction per reader thread held at the gate, then the
  // queued reads (17 distinct names, under the limit) in one.
  EXPECT_LE(reader.transactions(), 4u + 1u);
  for (size_t i = 0; i < kThreads * kReadsPerThread; ++i) {
    const Answers answers = log.answers(i);
    ASSERT_EQ(answers.size(), 2u);
    ASSERT_TRUE(answers[0].ok() && answers[0]->has_value());
    EXPECT_EQ((*answers[0])->name,
              absl::StrCat("n", (i / kReadsPerThread + i % kReadsPerThread) % 16));
    ASSERT_TRUE(answers[1].ok());
    EXPECT_FALSE(answers[1]->has_value());
  }
}

// The destructor answers what still waits (UNAVAILABLE) after the
// transaction in flight finished; nothing is left unanswered.
TEST(RecordReaderTest, DestructionAnswersWhatWaits) {
  auto memory = std::make_shared<MemoryKvStore>();
  PutNameRecord(*memory, kPrefix, SampleRecord("in-flight"));
  auto gated = std::make_shared<GatedKvStore>(memory);
  auto reader =
      std::make_unique<RecordReader>(gated, RecordReaderOptions{.prefix = kPrefix, .threads = 1});
  gated->Close();
  AnswerLog log(3);
  reader->Read({"in-flight"}, log.Collect(0));
  ASSERT_TRUE(gated->AwaitWaiting(1));
  reader->Read({"waiting-1"}, log.Collect(1));
  reader->Read({"waiting-2", "in-flight"}, log.Collect(2));
  // The reader's one thread is held in the store: the gate opens once the
  // destructor has had time to take the queue.
  std::thread opener([&] {
    absl::SleepFor(absl::Milliseconds(100));
    gated->Open();
  });
  reader.reset();
  opener.join();
  ASSERT_EQ(log.answered(), 3u) << "the destructor returned with reads unanswered";
  const Answers in_flight = log.answers(0);
  ASSERT_TRUE(in_flight[0].ok() && in_flight[0]->has_value()) << in_flight[0].status();
  for (size_t i : {1, 2}) {
    for (const RecordReader::Answer& answer : log.answers(i)) {
      EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable) << answer.status();
    }
  }
}

}  // namespace
}  // namespace tensord
