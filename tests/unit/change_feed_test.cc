// The registry's change feed: every publish, delete and eviction in version
// order, a bounded history that reports exactly what a late reader missed,
// and the wake of subscribers.
#include "service/registry/change_feed.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/registry/registry.h"

namespace tensord {
namespace {

ChangeEvent Published(uint64_t version, std::vector<std::string> names) {
  ChangeEvent event;
  event.kind = ChangeEvent::Kind::kPublished;
  event.version = version;
  for (std::string& name : names) {
    VersionInfo item;
    item.name = std::move(name);
    event.items.push_back(std::move(item));
  }
  return event;
}

std::vector<uint64_t> Versions(const ChangeRead& read) {
  std::vector<uint64_t> versions;
  for (const auto& event : read.events) versions.push_back(event->version);
  return versions;
}

TEST(ChangeFeedTest, ReadsAfterAPositionInOrderAndInPages) {
  ChangeFeed feed(100);
  for (uint64_t v = 1; v <= 5; ++v) feed.Append(Published(v, {"n"}));
  EXPECT_EQ(Versions(feed.ReadAfter(0, 100)), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(Versions(feed.ReadAfter(3, 100)), (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(Versions(feed.ReadAfter(1, 2)), (std::vector<uint64_t>{2, 3}));
  EXPECT_TRUE(feed.ReadAfter(5, 100).events.empty());
  EXPECT_EQ(feed.ReadAfter(0, 100).missed_to, 0u);
}

TEST(ChangeFeedTest, AReaderPastTheHistoryIsToldExactlyWhatItMayHaveMissed) {
  ChangeFeed feed(3);  // items
  feed.Append(Published(1, {"a"}));
  feed.Append(Published(2, {"b", "c"}));
  feed.Append(Published(4, {"d"}));
  feed.Append(Published(7, {"e"}));  // 5 items: changes 1 and 2 go
  EXPECT_EQ(feed.complete_after(), 2u);
  ChangeRead read = feed.ReadAfter(1, 100);
  EXPECT_EQ(read.missed_after, 1u);
  EXPECT_EQ(read.missed_to, 2u);
  EXPECT_EQ(Versions(read), (std::vector<uint64_t>{4, 7}));
  // At or past complete_after nothing is missed.
  read = feed.ReadAfter(2, 100);
  EXPECT_EQ(read.missed_to, 0u);
  EXPECT_EQ(Versions(read), (std::vector<uint64_t>{4, 7}));
}

TEST(ChangeFeedTest, TheNewestChangeStaysWhateverItsSize) {
  ChangeFeed feed(2);
  feed.Append(Published(1, {"a"}));
  feed.Append(Published(2, {"b", "c", "d", "e"}));
  ChangeRead read = feed.ReadAfter(1, 100);
  EXPECT_EQ(read.missed_to, 0u);
  ASSERT_EQ(read.events.size(), 1u);
  EXPECT_EQ(read.events[0]->items.size(), 4u);
}

TEST(ChangeFeedTest, SubscribersAreWokenAfterAppendsUntilUnsubscribed) {
  ChangeFeed feed(100);
  std::atomic<int> wakes{0};
  auto subscription = feed.Subscribe([&] { wakes.fetch_add(1); });
  feed.Append(Published(1, {"a"}));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (wakes.load() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_GE(wakes.load(), 1);
  subscription.reset();
  const int after = wakes.load();
  feed.Append(Published(2, {"b"}));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(wakes.load(), after);
}

TEST(ChangeFeedTest, ASubscriberMayUnsubscribeFromInsideItsWake) {
  ChangeFeed feed(100);
  std::unique_ptr<ChangeFeed::Subscription> subscription;
  std::atomic<bool> woke{false};
  subscription = feed.Subscribe([&] {
    subscription.reset();
    woke = true;
  });
  feed.Append(Published(1, {"a"}));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!woke.load() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_TRUE(woke.load());
}

// The registry's side: which changes it records, and their numbers.
dlpack::TensorLayout Bytes(int64_t n) {
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{kDLUInt, 8, 1};
  layout.shape = {n};
  return layout;
}

absl::StatusOr<VersionInfo> PutBytes(Registry& registry, const std::string& name, int64_t n,
                                     Retention retention = Retention::kDefault) {
  absl::StatusOr<PendingVersion> pending =
      registry.Prepare(name, Bytes(n), static_cast<uint64_t>(n), retention);
  if (!pending.ok()) return pending.status();
  return registry.Publish(*std::move(pending));
}

TEST(RegistryChangesTest, PublishesDeletesAndGroupsAreOneChangeEachInVersionOrder) {
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(PutBytes(registry, "m/a", 8).ok());                // 1
  ASSERT_TRUE(PutBytes(registry, "m/b", 8).ok());                // 2
  absl::StatusOr<uint64_t> removed = registry.Delete("m/a", 0);  // 3
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1u);
  std::vector<PendingVersion> group;
  for (const char* name : {"g/x", "g/y"}) {
    absl::StatusOr<PendingVersion> pending = registry.Prepare(name, Bytes(4), 4);
    ASSERT_TRUE(pending.ok());
    group.push_back(*std::move(pending));
  }
  ASSERT_TRUE(registry.PublishGroup(std::move(group)).ok());  // 4
  // The delete took a number: the next publish follows it.
  absl::StatusOr<VersionInfo> again = PutBytes(registry, "m/a", 8);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->version, 5u);

  ChangeRead read = registry.changes().ReadAfter(0, 100);
  ASSERT_EQ(read.events.size(), 5u);
  EXPECT_EQ(Versions(read), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(read.events[2]->kind, ChangeEvent::Kind::kDeleted);
  ASSERT_EQ(read.events[2]->items.size(), 1u);
  EXPECT_EQ(read.events[2]->items[0].name, "m/a");
  EXPECT_EQ(read.events[2]->items[0].version, 1u);
  EXPECT_TRUE(read.events[3]->atomic_group);
  EXPECT_EQ(read.events[3]->items.size(), 2u);
}

TEST(RegistryChangesTest, EvictionsAreRecordedWithTheVersionsTheyRemoved) {
  RegistryOptions options;
  options.max_host_bytes = 64 << 10;
  Registry registry(options);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(PutBytes(registry, "c/" + std::to_string(i), 8 << 10, Retention::kCache).ok());
  }
  ASSERT_GT(registry.evictions(), 0u);
  uint64_t evicted_items = 0;
  uint64_t previous = 0;
  for (const auto& event : registry.changes().ReadAfter(0, 1000).events) {
    EXPECT_GT(event->version, previous);
    previous = event->version;
    if (event->kind == ChangeEvent::Kind::kEvicted) evicted_items += event->items.size();
  }
  EXPECT_EQ(evicted_items, registry.evictions());
}

TEST(RegistryChangesTest, StartWatchTakesExistingVersionsAndThePositionTogether) {
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(PutBytes(registry, "m/a", 8).ok());
  ASSERT_TRUE(PutBytes(registry, "m/b", 8).ok());
  ASSERT_TRUE(PutBytes(registry, "x/c", 8).ok());
  absl::StatusOr<WatchStart> start = registry.StartWatch("m/", true, 0, 10);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(start->position, 3u);
  ASSERT_EQ(start->existing.size(), 2u);
  EXPECT_EQ(start->existing[1].name, "m/b");

  EXPECT_EQ(registry.StartWatch("m/", true, 0, 1).status().code(), absl::StatusCode::kOutOfRange);
  absl::StatusOr<WatchStart> resumed = registry.StartWatch("m/", false, 2, 10);
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->position, 2u);
  EXPECT_TRUE(resumed->existing.empty());
  absl::Status ahead = registry.StartWatch("m/", false, 4, 10).status();
  EXPECT_EQ(ahead.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(ahead.message().find("from_version 4"), absl::string_view::npos) << ahead;
  EXPECT_EQ(registry.StartWatch("bad prefix!", false, 0, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RegistryChangesTest, AfterARestoreEarlierPositionsAreReportedBehind) {
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(PutBytes(registry, "m/a", 8).ok());  // 1, as a restore would publish it
  registry.AdvanceNextVersion(10);                 // the snapshot's next version
  ChangeRead read = registry.changes().ReadAfter(3, 100);
  EXPECT_EQ(read.missed_after, 3u);
  EXPECT_EQ(read.missed_to, 9u);
  EXPECT_TRUE(read.events.empty());
  absl::StatusOr<VersionInfo> next = PutBytes(registry, "m/b", 8);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->version, 10u);
  read = registry.changes().ReadAfter(9, 100);
  EXPECT_EQ(read.missed_to, 0u);
  EXPECT_EQ(Versions(read), std::vector<uint64_t>{10});
}

}  // namespace
}  // namespace tensord
