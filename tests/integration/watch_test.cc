// Watch against real servers: changes in order (an atomic group as one
// event), the existing versions first with nothing lost in between,
// resuming from a position, a watcher that falls behind told exactly what
// it may have missed (never a silent gap), the --max-watches limit, tokens,
// and shutdown ending open watches at once.
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_pki.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

constexpr DLDataType kU8{kDLUInt, 8, 1};
constexpr absl::Duration kEventTimeout = absl::Seconds(20);

class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }

  void Start(std::vector<std::string> flags) {
    client_.reset();
    server_.reset();
    ServerProcessOptions options;
    options.flags = std::move(flags);
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = ConnectClient(server_->address(), RemoteClientOptions());
    ASSERT_NE(client_, nullptr);
  }

  uint64_t Put(const std::string& name, size_t size = 16, uint64_t seed = 1) {
    HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(size)}, PatternBytes(size, seed));
    absl::StatusOr<TensorInfo> info = client_->Put(name, tensor.dl());
    EXPECT_TRUE(info.ok()) << name << ": " << info.status();
    return info.ok() ? info->version : 0;
  }

  std::unique_ptr<WatchStream> Watch(const std::string& prefix, WatchOptions options = {}) {
    absl::StatusOr<std::unique_ptr<WatchStream>> watch = client_->Watch(prefix, options);
    EXPECT_TRUE(watch.ok()) << watch.status();
    return watch.ok() ? *std::move(watch) : nullptr;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> client_;
};

WatchEvent NextEvent(WatchStream& watch) {
  absl::StatusOr<WatchEvent> event = watch.Next(kEventTimeout);
  EXPECT_TRUE(event.ok()) << event.status();
  return event.ok() ? *std::move(event) : WatchEvent{};
}

std::vector<std::string> NamesOf(const WatchEvent& event) {
  std::vector<std::string> names;
  for (const TensorInfo& item : event.items) names.push_back(item.name);
  return names;
}

TEST_F(WatchTest, ChangesArriveInOrderAndAnAtomicGroupIsOneEvent) {
  std::unique_ptr<WatchStream> watch = Watch("m/");
  ASSERT_NE(watch, nullptr);
  const uint64_t a = Put("m/a");
  Put("other/x");  // outside the prefix: not sent
  const uint64_t b = Put("m/b");
  absl::StatusOr<uint64_t> deleted = client_->Delete("m/a");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  std::vector<HostTensor> tensors;
  for (int i = 0; i < 3; ++i) tensors.push_back(CompactTensor(kU8, {4}, PatternBytes(4, 7)));
  const std::vector<BatchPutItem> items = {
      {"m/g/0", tensors[0].dl()}, {"m/g/1", tensors[1].dl()}, {"other/g/2", tensors[2].dl()}};
  BatchPutOptions atomic;
  atomic.atomic = true;
  absl::StatusOr<BatchPutResult> group = client_->BatchPut(items, atomic);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_NE(group->group_version, 0u);

  WatchEvent first = NextEvent(*watch);
  EXPECT_EQ(first.kind, WatchEvent::Kind::kPublished);
  EXPECT_EQ(first.version, a);
  EXPECT_EQ(NamesOf(first), std::vector<std::string>{"m/a"});
  EXPECT_EQ(first.items[0].total_bytes, 16u);
  WatchEvent second = NextEvent(*watch);
  EXPECT_EQ(second.version, b);
  WatchEvent removal = NextEvent(*watch);
  EXPECT_EQ(removal.kind, WatchEvent::Kind::kDeleted);
  EXPECT_GT(removal.version, b);  // a delete takes a number of its own
  ASSERT_EQ(removal.items.size(), 1u);
  EXPECT_EQ(removal.items[0].name, "m/a");
  EXPECT_EQ(removal.items[0].version, a);
  WatchEvent published_group = NextEvent(*watch);
  EXPECT_EQ(published_group.version, group->group_version);
  EXPECT_TRUE(published_group.atomic_group);
  // Only the group's items under the prefix.
  EXPECT_EQ(NamesOf(published_group), (std::vector<std::string>{"m/g/0", "m/g/1"}));
  EXPECT_EQ(watch->position(), group->group_version);
  // Nothing else is waiting.
  EXPECT_EQ(watch->Next(absl::Milliseconds(200)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(WatchTest, ExistingVersionsComeFirstAndNoChangeIsLostAfterThem) {
  for (int i = 0; i < 5; ++i) Put(absl::StrCat("e/", i));
  WatchOptions options;
  options.send_existing = true;
  std::unique_ptr<WatchStream> watch = Watch("e/", options);
  ASSERT_NE(watch, nullptr);
  const uint64_t later = Put("e/new");
  for (int i = 0; i < 5; ++i) {
    WatchEvent existing = NextEvent(*watch);
    EXPECT_TRUE(existing.existing);
    EXPECT_EQ(NamesOf(existing), std::vector<std::string>{absl::StrCat("e/", i)});
  }
  WatchEvent live = NextEvent(*watch);
  EXPECT_FALSE(live.existing);
  EXPECT_EQ(live.version, later);
  EXPECT_EQ(NamesOf(live), std::vector<std::string>{"e/new"});
}

TEST_F(WatchTest, AWatchResumesAfterThePositionOfAnEarlierOne) {
  uint64_t position = 0;
  {
    std::unique_ptr<WatchStream> watch = Watch("r/");
    ASSERT_NE(watch, nullptr);
    Put("r/0");
    EXPECT_EQ(NextEvent(*watch).kind, WatchEvent::Kind::kPublished);
    position = watch->position();
  }
  const uint64_t missed_while_away = Put("r/1");
  WatchOptions resume;
  resume.from_version = position;
  std::unique_ptr<WatchStream> watch = Watch("r/", resume);
  ASSERT_NE(watch, nullptr);
  WatchEvent event = NextEvent(*watch);
  EXPECT_EQ(event.version, missed_while_away);
  EXPECT_EQ(NamesOf(event), std::vector<std::string>{"r/1"});

  // A position this server never issued is refused, naming it.
  WatchOptions ahead;
  ahead.from_version = missed_while_away + 1000;
  absl::Status refused = client_->Watch("r/", ahead).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(MessageMentions(refused, absl::StrCat("from_version ", ahead.from_version)))
      << refused;
  EXPECT_EQ(client_->Watch("bad prefix!").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(WatchTest, AResumeOlderThanTheHistoryIsToldWhatItMissed) {
  Start({"--watch-history=4"});
  const uint64_t first = Put("h/0");
  for (int i = 1; i < 10; ++i) Put(absl::StrCat("h/", i));
  WatchOptions resume;
  resume.from_version = first;
  std::unique_ptr<WatchStream> watch = Watch("h/", resume);
  ASSERT_NE(watch, nullptr);
  WatchEvent missed = NextEvent(*watch);
  ASSERT_EQ(missed.kind, WatchEvent::Kind::kFellBehind);
  EXPECT_EQ(missed.missed_after, first);
  // The history keeps the last 4 changes: the 6th put's version is where
  // the watcher resumes, and the last 4 puts follow.
  EXPECT_EQ(missed.version, first + 5);
  for (int i = 6; i < 10; ++i) {
    WatchEvent event = NextEvent(*watch);
    EXPECT_EQ(NamesOf(event), std::vector<std::string>{absl::StrCat("h/", i)});
  }
}

// The property that matters: every change is either delivered or inside a
// range the watcher was told it missed, even when the watcher reads slowly
// enough for the server's history to move past it.
TEST_F(WatchTest, ASlowWatcherNeverSkipsAChangeSilently) {
  Start({"--watch-history=64"});
  WatchOptions slow;
  slow.max_buffered_events = 1;
  std::unique_ptr<WatchStream> watch = Watch("s/", slow);
  ASSERT_NE(watch, nullptr);
  // Enough small changes, with long names, that the stream's flow-control
  // windows fill while the watcher does not read.
  constexpr int kBatches = 12;
  constexpr int kItems = 4000;
  const std::string padding(180, 'p');
  std::vector<HostTensor> tensors;
  for (int i = 0; i < kItems; ++i) tensors.push_back(CompactTensor(kU8, {1}, {uint8_t(i)}));
  uint64_t last_version = 0;
  for (int batch = 0; batch < kBatches; ++batch) {
    std::vector<std::string> names;
    std::vector<BatchPutItem> items;
    for (int i = 0; i < kItems; ++i)
      names.push_back(absl::StrCat("s/", padding, "/", batch, "/", i));
    for (int i = 0; i < kItems; ++i) items.push_back({names[i], tensors[i].dl()});
    absl::StatusOr<BatchPutResult> put = client_->BatchPut(items);
    ASSERT_TRUE(put.ok()) << put.status();
    for (const auto& item : put->items) {
      ASSERT_TRUE(item.ok()) << item.status();
      last_version = std::max(last_version, item->version);
    }
  }
  std::set<uint64_t> covered;
  uint64_t fell_behind = 0;
  uint64_t previous = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (watch->position() < last_version && absl::Now() < deadline) {
    absl::StatusOr<WatchEvent> event = watch->Next(kEventTimeout);
    ASSERT_TRUE(event.ok()) << event.status();
    ASSERT_GT(event->version, previous) << "events out of order";
    if (event->kind == WatchEvent::Kind::kFellBehind) {
      ++fell_behind;
      ASSERT_GE(event->missed_after, previous);
      for (uint64_t v = event->missed_after + 1; v <= event->version; ++v) covered.insert(v);
    } else {
      covered.insert(event->version);
    }
    previous = event->version;
  }
  ASSERT_EQ(watch->position(), last_version);
  EXPECT_GT(fell_behind, 0u) << "the watcher never fell behind: the test did not test it";
  // Every version of the batches (each item its own change) is covered.
  for (uint64_t v = last_version - kBatches * kItems + 1; v <= last_version; ++v) {
    ASSERT_TRUE(covered.contains(v)) << "version " << v << " skipped silently";
  }
}

TEST_F(WatchTest, AGroupLargerThanOneMessageIsStillOneEvent) {
  // 20,000 items with 200-byte names: several messages' worth.
  constexpr int kItems = 20000;
  const std::string padding(190, 'q');
  std::vector<HostTensor> tensors;
  std::vector<std::string> names;
  std::vector<BatchPutItem> items;
  for (int i = 0; i < kItems; ++i) {
    tensors.push_back(CompactTensor(kU8, {1}, {uint8_t(i)}));
    names.push_back(absl::StrCat("big/", padding, "/", i));
  }
  for (int i = 0; i < kItems; ++i) items.push_back({names[i], tensors[i].dl()});
  std::unique_ptr<WatchStream> watch = Watch("big/");
  ASSERT_NE(watch, nullptr);
  BatchPutOptions atomic;
  atomic.atomic = true;
  absl::StatusOr<BatchPutResult> put = client_->BatchPut(items, atomic);
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_NE(put->group_version, 0u);
  WatchEvent event = NextEvent(*watch);
  EXPECT_EQ(event.version, put->group_version);
  EXPECT_TRUE(event.atomic_group);
  EXPECT_EQ(event.items.size(), static_cast<size_t>(kItems));
  EXPECT_EQ(watch->position(), put->group_version);
}

TEST_F(WatchTest, TheWatchLimitIsAnsweredByNameAndFreedByCancel) {
  Start({"--max-watches=2"});
  std::unique_ptr<WatchStream> one = Watch("");
  std::unique_ptr<WatchStream> two = Watch("");
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  absl::Status third = client_->Watch("").status();
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(MessageMentions(third, "--max-watches")) << third;
  EXPECT_TRUE(MessageMentions(third, "is 2")) << third;
  one->Cancel();
  EXPECT_EQ(one->Next(kEventTimeout).status().code(), absl::StatusCode::kCancelled);
  one.reset();
  // The server lets go of the cancelled watch shortly after.
  std::unique_ptr<WatchStream> again;
  EXPECT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<std::unique_ptr<WatchStream>> watch = client_->Watch("");
        if (!watch.ok()) return false;
        again = *std::move(watch);
        return true;
      },
      absl::Seconds(10)));
}

TEST_F(WatchTest, ShutdownEndsOpenWatchesAtOnce) {
  std::unique_ptr<WatchStream> watch = Watch("");
  ASSERT_NE(watch, nullptr);
  const absl::Time start = absl::Now();
  absl::StatusOr<int> stopped = server_->Stop(SIGTERM, absl::Seconds(15));
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0) << *stopped;
  // Well inside the 10 s shutdown grace a watch would otherwise hold it for.
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  absl::StatusOr<WatchEvent> ended = watch->Next(kEventTimeout);
  EXPECT_EQ(ended.status().code(), absl::StatusCode::kUnavailable) << ended.status();
}

TEST(WatchAuthTest, ATokenWatchesOnlyItsNamespace) {
  constexpr char kAdmin[] = "admin-token-0123456789abcdef";
  constexpr char kTeamA[] = "team-a-token-0123456789abcdef";
  TempDir dir;
  WriteFile(dir.File("tokens"), absl::StrCat(kAdmin, " admin\n", kTeamA, " read team-a/\n"));
  ServerProcessOptions options;
  options.flags = {"--tokens-file=" + dir.File("tokens")};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto connect = [&](const char* token) {
    return ConnectClient((*server)->address(), RemoteClientOptions(token));
  };
  std::unique_ptr<Client> admin = connect(kAdmin);
  std::unique_ptr<Client> team_a = connect(kTeamA);
  ASSERT_NE(admin, nullptr);
  ASSERT_NE(team_a, nullptr);
  absl::Status outside = team_a->Watch("team-b/").status();
  EXPECT_EQ(outside.code(), absl::StatusCode::kPermissionDenied) << outside;
  // An empty prefix means the token's own namespace.
  absl::StatusOr<std::unique_ptr<WatchStream>> own = team_a->Watch("");
  ASSERT_TRUE(own.ok()) << own.status();
  HostTensor tensor = CompactTensor(kU8, {4}, PatternBytes(4, 1));
  ASSERT_TRUE(admin->Put("team-b/secret", tensor.dl()).ok());
  absl::StatusOr<TensorInfo> mine = admin->Put("team-a/w", tensor.dl());
  ASSERT_TRUE(mine.ok());
  absl::StatusOr<WatchEvent> event = (*own)->Next(kEventTimeout);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(NamesOf(*event), std::vector<std::string>{"team-a/w"});
}

}  // namespace
}  // namespace tensord::testing
