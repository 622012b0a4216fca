#include "service/registry/registry.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "service/common/crc32c.h"
#include "service/common/tensor_name.h"

namespace tensord {
namespace {

dlpack::TensorLayout FloatVector(int64_t n) {
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{dlpack::kFloat, 32, 1};
  layout.shape = {n};
  return layout;
}

// Builds a filled pending version of `n` float32 values equal to `fill`.
absl::StatusOr<PendingVersion> MakePending(Registry& registry, const std::string& name, int64_t n,
                                           float fill) {
  absl::StatusOr<PendingVersion> pending =
      registry.Prepare(name, FloatVector(n), static_cast<uint64_t>(n) * 4);
  if (!pending.ok()) return pending.status();
  const std::vector<float> values(static_cast<size_t>(n), fill);
  if (absl::Status written = pending->buffer->Write(0, values.data(), values.size() * 4);
      !written.ok()) {
    return written;
  }
  return pending;
}

TEST(RegistryTest, PublishStatFetchDelete) {
  Registry registry(RegistryOptions{});
  auto pending = MakePending(registry, "w/layer0", 16, 1.5f);
  ASSERT_TRUE(pending.ok()) << pending.status();
  auto info = registry.Publish(std::move(*pending));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name, "w/layer0");
  EXPECT_GT(info->version, 0u);
  EXPECT_EQ(info->total_bytes, 64u);

  auto lease = registry.Acquire("w/layer0", 0);
  ASSERT_TRUE(lease.ok());
  EXPECT_TRUE((*lease)->buffer->sealed());
  EXPECT_EQ((*lease)->crc32c, Crc32c((*lease)->buffer->data(), 64));
  auto stat = registry.Stat("w/layer0", info->version);
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->open_leases, 1u);
  // Find holds the version itself without leasing it.
  auto found = registry.Find("w/layer0", 0);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ((*found)->version, info->version);
  EXPECT_EQ((*found)->open_leases.load(), 1u);
  EXPECT_EQ(registry.Stat("w/layer0", 0)->open_leases, 1u);
  EXPECT_EQ(registry.Find("w/layer0", info->version + 1).status().code(),
            absl::StatusCode::kNotFound);
  found = absl::NotFoundError("released");

  auto removed = registry.Delete("w/layer0", 0);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, info->version);
  EXPECT_EQ(registry.Stat("w/layer0", 0).status().code(), absl::StatusCode::kNotFound);
  // The reader still holds its bytes, and they still count against capacity.
  EXPECT_EQ(registry.host_bytes_used(), 64u);
  float first = 0;
  std::memcpy(&first, (*lease)->buffer->data(), 4);
  EXPECT_EQ(first, 1.5f);
  // A held, deleted version is still reachable by its number.
  EXPECT_TRUE(registry.Acquire("w/layer0", info->version).ok());
  lease->Reset();
  EXPECT_EQ(registry.host_bytes_used(), 0u);
  EXPECT_EQ(registry.Acquire("w/layer0", info->version).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RegistryTest, NewerVersionSupersedesButReadersKeepOld) {
  Registry registry(RegistryOptions{});
  auto v1 = registry.Publish(*MakePending(registry, "t", 4, 1.0f));
  ASSERT_TRUE(v1.ok());
  auto old_lease = registry.Acquire("t", 0);
  ASSERT_TRUE(old_lease.ok());
  auto v2 = registry.Publish(*MakePending(registry, "t", 4, 2.0f));
  ASSERT_TRUE(v2.ok());
  EXPECT_GT(v2->version, v1->version);
  auto latest = registry.Acquire("t", 0);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ((*latest)->version, v2->version);
  auto old_again = registry.Acquire("t", v1->version);
  ASSERT_TRUE(old_again.ok());
  float value = 0;
  std::memcpy(&value, (*old_again)->buffer->data(), 4);
  EXPECT_EQ(value, 1.0f);
}

TEST(RegistryTest, CapacityIsEnforcedAndReturned) {
  Registry registry(RegistryOptions{.max_host_bytes = 100, .max_tensors = 10});
  auto first = MakePending(registry, "a", 20, 0.0f);  // 80 bytes
  ASSERT_TRUE(first.ok());
  auto second = MakePending(registry, "b", 20, 0.0f);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(second.status().message().find("80 of 100"), absl::string_view::npos)
      << second.status();
  first = absl::StatusOr<PendingVersion>(absl::CancelledError("dropped"));
  EXPECT_EQ(registry.host_bytes_used(), 0u);
  EXPECT_TRUE(MakePending(registry, "b", 20, 0.0f).ok());
}

TEST(RegistryTest, MaxTensorsCountsNamesNotVersions) {
  Registry registry(RegistryOptions{.max_host_bytes = 1 << 20, .max_tensors = 1});
  ASSERT_TRUE(registry.Publish(*MakePending(registry, "a", 1, 0.0f)).ok());
  ASSERT_TRUE(registry.Publish(*MakePending(registry, "a", 1, 0.0f)).ok());
  auto other = registry.Publish(*MakePending(registry, "b", 1, 0.0f));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(registry.tensor_count(), 1u);
}

TEST(RegistryTest, PublishRejectsBadCrcAndLayout) {
  Registry registry(RegistryOptions{});
  auto bad_crc = registry.Publish(*MakePending(registry, "a", 4, 1.0f), 12345u);
  EXPECT_EQ(bad_crc.status().code(), absl::StatusCode::kDataLoss);
  auto pending = MakePending(registry, "a", 4, 1.0f);
  pending->layout.shape = {5};  // needs 20 bytes, buffer has 16
  EXPECT_EQ(registry.Publish(std::move(*pending)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.tensor_count(), 0u);
  EXPECT_EQ(registry.host_bytes_used(), 0u);
}

TEST(RegistryTest, ListPaginatesInNameOrder) {
  Registry registry(RegistryOptions{});
  for (const char* name : {"m/c", "m/a", "x/z", "m/b", "m/e", "m/d"}) {
    ASSERT_TRUE(registry.Publish(*MakePending(registry, name, 1, 0.0f)).ok());
  }
  std::vector<std::string> names;
  std::string token;
  int pages = 0;
  do {
    auto page = registry.List("m/", 2, token);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const auto& info : page->tensors) names.push_back(info.name);
    token = page->next_page_token;
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_EQ(names, (std::vector<std::string>{"m/a", "m/b", "m/c", "m/d", "m/e"}));
  EXPECT_EQ(registry.List("", 5000, "").status().code(), absl::StatusCode::kInvalidArgument);
  auto bad = registry.List("", 0, "!!not-a-token!!");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("!!not-a-token!!"), absl::string_view::npos);
}

TEST(RegistryTest, DeleteWithStaleVersionFails) {
  Registry registry(RegistryOptions{});
  auto v1 = registry.Publish(*MakePending(registry, "a", 1, 0.0f));
  auto v2 = registry.Publish(*MakePending(registry, "a", 1, 0.0f));
  auto stale = registry.Delete("a", v1->version);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(registry.Delete("a", v2->version).ok());
  EXPECT_EQ(registry.Delete("a", 0).status().code(), absl::StatusCode::kNotFound);
}

TEST(RegistryTest, ConcurrentPublishersAndReadersSeeWholeVersions) {
  Registry registry(RegistryOptions{});
  constexpr int kRounds = 200;
  std::vector<std::thread> threads;
  for (int writer = 0; writer < 2; ++writer) {
    threads.emplace_back([&registry, writer] {
      for (int i = 0; i < kRounds; ++i) {
        auto pending = MakePending(registry, "shared", 256, static_cast<float>(writer * 1000 + i));
        ASSERT_TRUE(pending.ok());
        ASSERT_TRUE(registry.Publish(std::move(*pending)).ok());
      }
    });
  }
  for (int reader = 0; reader < 2; ++reader) {
    threads.emplace_back([&registry] {
      for (int i = 0; i < kRounds; ++i) {
        auto lease = registry.Acquire("shared", 0);
        if (!lease.ok()) continue;
        const float* values = reinterpret_cast<const float*>((*lease)->buffer->data());
        for (int j = 1; j < 256; ++j) ASSERT_EQ(values[j], values[0]);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(registry.host_bytes_used(), 256u * 4);
}

TEST(RegistryTest, StatsCountHeldOlderVersionsAndTheirLeases) {
  Registry registry(RegistryOptions{});
  EXPECT_EQ(registry.Stats().versions, 0u);
  ASSERT_TRUE(registry.Publish(*MakePending(registry, "a", 4, 1.0f)).ok());
  ASSERT_TRUE(registry.Publish(*MakePending(registry, "b", 8, 1.0f)).ok());
  absl::StatusOr<Lease> old_a = registry.Acquire("a", 0);
  ASSERT_TRUE(old_a.ok());
  ASSERT_TRUE(registry.Publish(*MakePending(registry, "a", 2, 2.0f)).ok());
  absl::StatusOr<Lease> new_a = registry.Acquire("a", 0);
  ASSERT_TRUE(new_a.ok());

  RegistryStats stats = registry.Stats();
  EXPECT_EQ(stats.tensors, 2u);
  EXPECT_EQ(stats.versions, 3u);  // a (new), b, and the old a a reader holds
  EXPECT_EQ(stats.stored_bytes, 8u + 32u + 16u);
  EXPECT_EQ(stats.open_leases, 2u);

  old_a->Reset();
  stats = registry.Stats();
  EXPECT_EQ(stats.versions, 2u);
  EXPECT_EQ(stats.stored_bytes, 8u + 32u);
  EXPECT_EQ(stats.open_leases, 1u);
}

TEST(RegistryTest, NamesAreValidated) {
  Registry registry(RegistryOptions{});
  for (const char* name :
       {"", "/abs", "a//b", "../x", "a/./b", "a b", "tab\t", "a/", "a/..", ".", "a/b/."}) {
    auto status = registry.Acquire(name, 0).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(registry.Find(name, 0).status().code(), absl::StatusCode::kInvalidArgument) << name;
  }
  // Dots inside a segment are a name, not a path step.
  for (const char* name : {"a/.b", "a/..b/c", "x...", "a.b/c"}) {
    EXPECT_EQ(registry.Find(name, 0).status().code(), absl::StatusCode::kNotFound) << name;
  }
  EXPECT_EQ(registry.Acquire(std::string(257, 'a'), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Acquire("ok/name-1.2:3", 0).status().code(), absl::StatusCode::kNotFound);
  // Readers check a name when it is not found; the answers are the same
  // with a specific version and in a batch, and they name the name.
  const std::string overlong(300, 'a');
  const std::vector<NameVersionView> batch = {{"a//b", 0}, {"a/..", 7},      {overlong, 0},
                                              {"", 3},     {"fine/name", 0}, {"fine/name", 9}};
  std::vector<absl::StatusOr<Lease>> leases = registry.AcquireMany(batch);
  ASSERT_EQ(leases.size(), batch.size());
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(leases[i].status().code(), absl::StatusCode::kInvalidArgument) << i;
  }
  EXPECT_TRUE(absl::StrContains(leases[0].status().message(), "a//b")) << leases[0].status();
  EXPECT_EQ(leases[4].status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(leases[5].status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Find("a/./b", 4).status().code(), absl::StatusCode::kInvalidArgument);
}

// The rules spelled out plainly, to check the one-pass validator against:
// every name of up to 5 bytes over an alphabet that hits each rule.
bool FollowsNameRules(absl::string_view name) {
  if (name.empty() || name.size() > kMaxTensorNameBytes || name.front() == '/') return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        absl::string_view("_.:/-").find(c) == absl::string_view::npos) {
      return false;
    }
  }
  for (absl::string_view segment : absl::StrSplit(name, '/')) {
    if (segment.empty() || segment == "." || segment == "..") return false;
  }
  return true;
}

TEST(TensorNameTest, EveryShortNameIsJudgedByTheRules) {
  const std::string alphabet("a./-_\0\xc3 ", 8);
  int checked = 0;
  std::string name;
  std::function<void()> visit = [&] {
    const absl::Status status = ValidateTensorName(name);
    ASSERT_EQ(status.ok(), FollowsNameRules(name)) << absl::CHexEscape(name) << ": " << status;
    if (!status.ok()) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    }
    ++checked;
    if (name.size() == 5) return;
    for (char c : alphabet) {
      name.push_back(c);
      visit();
      name.pop_back();
    }
  };
  visit();
  EXPECT_EQ(checked, 1 + 8 + 64 + 512 + 4096 + 32768);
  EXPECT_TRUE(ValidateTensorName(std::string(kMaxTensorNameBytes, 'a')).ok());
  EXPECT_FALSE(ValidateTensorName(std::string(kMaxTensorNameBytes + 1, 'a')).ok());
}

}  // namespace
}  // namespace tensord

namespace tensord {
namespace {

TEST(RegistryArenaTest, SmallVersionsShareArenasLargeOnesOwnAMemfd) {
  RegistryOptions options;
  options.arenas.max_slot_bytes = 64 * 1024;
  Registry registry(options);
  for (const char* name : {"small/a", "small/b"}) {
    auto pending = MakePending(registry, name, 1000, 2.0f);
    ASSERT_TRUE(pending.ok()) << pending.status();
    ASSERT_TRUE(registry.Publish(std::move(*pending)).ok());
  }
  auto large = MakePending(registry, "large", 16 * 1024 + 1, 3.0f);  // just over 64 KiB
  ASSERT_TRUE(large.ok());
  ASSERT_TRUE(registry.Publish(std::move(*large)).ok());
  Lease a = *registry.Acquire("small/a", 0);
  Lease b = *registry.Acquire("small/b", 0);
  Lease big = *registry.Acquire("large", 0);
  EXPECT_NE(a->buffer->arena_id(), 0u);
  EXPECT_EQ(a->buffer->arena_id(), b->buffer->arena_id());
  EXPECT_EQ(a->buffer->fd(), b->buffer->fd());
  EXPECT_NE(a->buffer->mapping_offset(), b->buffer->mapping_offset());
  EXPECT_EQ(big->buffer->arena_id(), 0u);
  EXPECT_EQ(big->buffer->mapping_offset(), 0u);
  // Capacity counts tensor bytes wherever they live.
  EXPECT_EQ(registry.host_bytes_used(), 2 * 4000u + (16 * 1024 + 1) * 4u);
  EXPECT_EQ(registry.Stats().arenas.slots_used, 2u);
}

TEST(RegistryArenaTest, ACreateWritesItsOwnMemfdAndPublishMovesItIntoAnArena) {
  Registry registry(RegistryOptions{});
  auto pending = registry.Prepare("created", FloatVector(256), 1024, Retention::kDefault,
                                  HostPlacement::kOwnMemfd);
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(pending->buffer->arena_id(), 0u);  // what the producer gets to write
  const std::vector<float> values(256, 4.0f);
  ASSERT_TRUE(pending->buffer->Write(0, values.data(), 1024).ok());
  ASSERT_TRUE(registry.Publish(std::move(*pending)).ok());
  Lease lease = *registry.Acquire("created", 0);
  EXPECT_NE(lease->buffer->arena_id(), 0u);
  EXPECT_EQ(lease->crc32c, Crc32c(lease->buffer->data(), 1024));
  EXPECT_EQ(std::memcmp(lease->buffer->data(), values.data(), 1024), 0);
}

TEST(RegistryArenaTest, ASlotIsReusedOnlyAfterTheLastLeaseEnds) {
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(registry.Publish(*MakePending(registry, "kv/0", 1024, 7.0f)).ok());
  Lease held = *registry.Acquire("kv/0", 0);
  const uint64_t offset = held->buffer->mapping_offset();
  ASSERT_TRUE(registry.Delete("kv/0", 0).ok());
  for (int i = 1; i < 200; ++i) {
    const std::string name = "kv/" + std::to_string(i);
    ASSERT_TRUE(registry.Publish(*MakePending(registry, name, 1024, static_cast<float>(i))).ok());
    Lease other = *registry.Acquire(name, 0);
    EXPECT_NE(other->buffer->mapping_offset(), offset) << name;
    if (i % 2 == 0) ASSERT_TRUE(registry.Delete(name, 0).ok());
  }
  float value = 0;
  for (int i = 0; i < 1024; ++i) {
    std::memcpy(&value, held->buffer->data() + i * 4, 4);
    ASSERT_EQ(value, 7.0f) << i;
  }
  held.Reset();
  // Now the slot is free and is handed out again.
  bool reused = false;
  for (int i = 0; i < 200 && !reused; ++i) {
    const std::string name = "again/" + std::to_string(i);
    ASSERT_TRUE(registry.Publish(*MakePending(registry, name, 1024, 1.0f)).ok());
    reused = (*registry.Acquire(name, 0))->buffer->mapping_offset() == offset;
  }
  EXPECT_TRUE(reused);
}

float FirstValue(const Lease& lease) {
  float value = 0;
  std::memcpy(&value, lease->buffer->data(), sizeof(value));
  return value;
}

std::vector<PendingVersion> MakeGroup(Registry& registry, const std::vector<std::string>& names,
                                      float fill) {
  std::vector<PendingVersion> group;
  for (const std::string& name : names) {
    absl::StatusOr<PendingVersion> pending = MakePending(registry, name, 8, fill);
    EXPECT_TRUE(pending.ok()) << pending.status();
    if (pending.ok()) group.push_back(*std::move(pending));
  }
  return group;
}

TEST(RegistryGroupTest, AGroupPublishesUnderOneVersionAndIsFetchedWhole) {
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(registry.Publish(*MakePending(registry, "other", 8, 0.0f)).ok());
  absl::StatusOr<std::vector<VersionInfo>> published =
      registry.PublishGroup(MakeGroup(registry, {"model/b", "model/a", "model/c"}, 1.0f));
  ASSERT_TRUE(published.ok()) << published.status();
  ASSERT_EQ(published->size(), 3u);
  const uint64_t group = (*published)[0].version;
  for (const VersionInfo& info : *published) EXPECT_EQ(info.version, group);
  EXPECT_EQ((*published)[0].name, "model/b");  // in the order given

  absl::StatusOr<std::vector<Lease>> whole = registry.AcquireGroup(group);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->size(), 3u);
  EXPECT_EQ((*whole)[0]->name, "model/a");  // in name order
  EXPECT_EQ((*whole)[2]->name, "model/c");

  // A new group replaces every item; the old group stays whole while held.
  ASSERT_TRUE(
      registry.PublishGroup(MakeGroup(registry, {"model/a", "model/b", "model/c"}, 2.0f)).ok());
  absl::StatusOr<std::vector<Lease>> old = registry.AcquireGroup(group);
  ASSERT_TRUE(old.ok()) << old.status();
  for (const Lease& lease : *old) EXPECT_EQ(FirstValue(lease), 1.0f);
  whole->clear();
  old->clear();
  absl::Status gone = registry.AcquireGroup(group).status();
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(gone.message().find("no longer whole"), std::string::npos) << gone;
  EXPECT_EQ(registry.AcquireGroup(group + 100).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.AcquireGroup((*registry.Acquire("other", 0))->version).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RegistryGroupTest, AGroupWithABadItemPublishesNothing) {
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(registry.PublishGroup(MakeGroup(registry, {"w/a", "w/b"}, 1.0f)).ok());
  std::vector<PendingVersion> group = MakeGroup(registry, {"w/a", "w/b"}, 2.0f);
  group[1].layout.shape = {999};  // does not fit its bytes
  absl::Status failed = registry.PublishGroup(std::move(group)).status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(failed.message().find("'w/b'"), std::string::npos) << failed;
  EXPECT_EQ(FirstValue(*registry.Acquire("w/a", 0)), 1.0f);
  EXPECT_EQ(FirstValue(*registry.Acquire("w/b", 0)), 1.0f);

  absl::Status twice = registry.PublishGroup(MakeGroup(registry, {"w/a", "w/a"}, 3.0f)).status();
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(twice.message().find("appears twice"), std::string::npos) << twice;
  EXPECT_EQ(registry.PublishGroup({}).status().code(), absl::StatusCode::kInvalidArgument);

  RegistryOptions small;
  small.max_tensors = 3;
  Registry limited(small);
  ASSERT_TRUE(limited.Publish(*MakePending(limited, "x", 8, 0.0f)).ok());
  absl::Status full =
      limited.PublishGroup(MakeGroup(limited, {"g/1", "g/2", "g/3"}, 1.0f)).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("--max-tensors"), std::string::npos) << full;
  EXPECT_EQ(limited.tensor_count(), 1u);
  EXPECT_EQ(limited.host_bytes_used(), 32u);  // the refused group's bytes are back
}

TEST(RegistryGroupTest, ReadersNeverSeeHalfAGroup) {
  Registry registry(RegistryOptions{});
  const std::vector<std::string> names = {"m/0", "m/1", "m/2", "m/3"};
  ASSERT_TRUE(registry.PublishGroup(MakeGroup(registry, names, 0.0f)).ok());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int round = 1; round <= 300; ++round) {
      ASSERT_TRUE(
          registry.PublishGroup(MakeGroup(registry, names, static_cast<float>(round))).ok());
    }
    done = true;
  });
  std::vector<NameVersionView> items;
  for (const std::string& name : names) items.push_back({name, 0});
  int mixed = 0;
  int reads = 0;
  while (!done || reads == 0) {
    std::vector<absl::StatusOr<Lease>> leases = registry.AcquireMany(items);
    ASSERT_EQ(leases.size(), names.size());
    absl::StatusOr<std::vector<Lease>> by_prefix = registry.AcquirePrefix("m/", 10);
    ASSERT_TRUE(by_prefix.ok()) << by_prefix.status();
    for (size_t i = 1; i < names.size(); ++i) {
      ASSERT_TRUE(leases[i].ok()) << leases[i].status();
      if ((*leases[i])->version != (*leases[0])->version ||
          FirstValue(*leases[i]) != FirstValue(*leases[0]) ||
          (*by_prefix)[i]->version != (*by_prefix)[0]->version) {
        ++mixed;
      }
    }
    ++reads;
  }
  writer.join();
  EXPECT_EQ(mixed, 0) << "of " << reads << " reads";
}

TEST(RegistryGroupTest, AcquireManyFailsOnlyTheBadItems) {
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(registry.Publish(*MakePending(registry, "a", 8, 1.0f)).ok());
  const std::vector<NameVersionView> items = {{"a", 0}, {"missing", 0}, {"../bad", 0}, {"a", 99}};
  std::vector<absl::StatusOr<Lease>> leases = registry.AcquireMany(items);
  ASSERT_EQ(leases.size(), 4u);
  EXPECT_TRUE(leases[0].ok());
  EXPECT_EQ(leases[1].status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(leases[2].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(leases[3].status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(leases[3].status().message().find("version 99"), std::string::npos);

  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(registry.Publish(*MakePending(registry, "p/" + std::to_string(i), 8, 1.0f)).ok());
  }
  EXPECT_EQ(registry.AcquirePrefix("p/", 5)->size(), 5u);
  absl::Status over = registry.AcquirePrefix("p/", 4).status();
  EXPECT_EQ(over.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(over.message().find("more than 4"), std::string::npos) << over;
  EXPECT_EQ(registry.AcquirePrefix("bad prefix", 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A snapshot may hold only part of a group (items replaced since, cached,
// on a device): its items come back with their version, but never pass for
// the whole group.
TEST(RegistryGroupTest, RestoredItemsKeepTheirSharedVersionButNoGroup) {
  Registry registry(RegistryOptions{});
  for (const char* name : {"r/a", "r/b"}) {
    PendingVersion pending = *MakePending(registry, name, 8, 1.0f);
    pending.restored_version = 40;
    ASSERT_TRUE(registry.Publish(std::move(pending)).ok()) << name;
  }
  EXPECT_EQ((*registry.Acquire("r/b", 40))->version, 40u);
  EXPECT_EQ(registry.AcquireGroup(40).status().code(), absl::StatusCode::kNotFound);
  // A version below the last one is still refused.
  PendingVersion late = *MakePending(registry, "r/c", 8, 1.0f);
  late.restored_version = 39;
  EXPECT_EQ(registry.Publish(std::move(late)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RegistryArenaTest, ArenaDomainsKeepNamesApart) {
  RegistryOptions options;
  options.arena_domain = [](absl::string_view name) {
    return std::string(name.substr(0, name.find('/')));
  };
  Registry registry(options);
  for (const char* name : {"a/1", "a/2", "b/1"}) {
    ASSERT_TRUE(registry.Publish(*MakePending(registry, name, 16, 1.0f)).ok());
  }
  EXPECT_EQ((*registry.Acquire("a/1", 0))->buffer->arena_id(),
            (*registry.Acquire("a/2", 0))->buffer->arena_id());
  EXPECT_NE((*registry.Acquire("a/1", 0))->buffer->arena_id(),
            (*registry.Acquire("b/1", 0))->buffer->arena_id());
}

}  // namespace
}  // namespace tensord
