// Retention classes and eviction: cache versions go least recently used
// first, never while leased; default and pinned versions never go.
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/registry/registry.h"

namespace tensord {
namespace {

// Publishes `bytes` bytes of value `fill` as `name` with `retention`.
absl::StatusOr<VersionInfo> PublishBytes(Registry& registry, const std::string& name,
                                         uint64_t bytes, Retention retention, uint8_t fill = 7) {
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{dlpack::kUInt, 8, 1};
  layout.shape = {static_cast<int64_t>(bytes)};
  absl::StatusOr<PendingVersion> pending = registry.Prepare(name, layout, bytes, retention);
  if (!pending.ok()) return pending.status();
  if (bytes > 0) {
    const std::vector<uint8_t> filled(bytes, fill);
    if (absl::Status written = pending->buffer->Write(0, filled.data(), bytes); !written.ok()) {
      return written;
    }
  }
  return registry.Publish(std::move(*pending));
}

RegistryOptions SmallRegistry(double high, double low) {
  RegistryOptions options;
  options.max_host_bytes = 1000;
  options.eviction_high_watermark = high;
  options.eviction_low_watermark = low;
  return options;
}

TEST(RegistryTest, CacheVersionsAreEvictedLeastRecentlyUsedAboveTheHighWatermark) {
  Registry registry(SmallRegistry(0.9, 0.5));
  for (const char* name : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(PublishBytes(registry, name, 200, Retention::kCache).ok());
  }
  EXPECT_EQ(registry.evictions(), 0u);
  // Reading "a" makes it the most recently used cache version.
  ASSERT_TRUE(registry.Acquire("a", 0).ok());
  // 1000 bytes in use > 900: evict b, c, d (oldest first) until <= 500.
  ASSERT_TRUE(PublishBytes(registry, "e", 200, Retention::kDefault).ok());
  EXPECT_EQ(registry.evictions(), 3u);
  EXPECT_EQ(registry.evicted_bytes(), 600u);
  EXPECT_EQ(registry.host_bytes_used(), 400u);
  EXPECT_TRUE(registry.Stat("a", 0).ok());
  EXPECT_TRUE(registry.Stat("e", 0).ok());
  for (const char* name : {"b", "c", "d"}) {
    EXPECT_EQ(registry.Stat(name, 0).status().code(), absl::StatusCode::kNotFound) << name;
  }
}

TEST(RegistryTest, OverwriteCountsTheBytesOfTheVersionItReplaces) {
  // The replaced version of "d" has no reader: its 300 bytes are as good as
  // free, so use stays at 700 (below the 900-byte high watermark).
  Registry registry(SmallRegistry(0.9, 0.5));
  ASSERT_TRUE(PublishBytes(registry, "d", 300, Retention::kDefault).ok());
  ASSERT_TRUE(PublishBytes(registry, "c1", 200, Retention::kCache).ok());
  ASSERT_TRUE(PublishBytes(registry, "c2", 200, Retention::kCache).ok());
  ASSERT_TRUE(PublishBytes(registry, "d", 300, Retention::kDefault, 9).ok());
  EXPECT_EQ(registry.evictions(), 0u);
  EXPECT_TRUE(registry.Stat("c1", 0).ok());
  EXPECT_TRUE(registry.Stat("c2", 0).ok());
}

TEST(RegistryTest, OverwriteOfALeasedVersionStillCountsItsBytes) {
  // A reader keeps the replaced bytes alive, so they count: 1000 in use.
  Registry registry(SmallRegistry(0.9, 0.5));
  ASSERT_TRUE(PublishBytes(registry, "d", 300, Retention::kDefault).ok());
  ASSERT_TRUE(PublishBytes(registry, "c1", 200, Retention::kCache).ok());
  ASSERT_TRUE(PublishBytes(registry, "c2", 200, Retention::kCache).ok());
  absl::StatusOr<Lease> reader = registry.Acquire("d", 0);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(PublishBytes(registry, "d", 300, Retention::kDefault, 9).ok());
  EXPECT_GT(registry.evictions(), 0u);
}

TEST(RegistryTest, LeasedCacheVersionsAreNeverEvicted) {
  Registry registry(SmallRegistry(0.5, 0.1));
  ASSERT_TRUE(PublishBytes(registry, "held", 400, Retention::kCache).ok());
  absl::StatusOr<Lease> lease = registry.Acquire("held", 0);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(PublishBytes(registry, "loose", 400, Retention::kCache).ok());
  // The version just published is never the one evicted for its own put.
  EXPECT_EQ(registry.evictions(), 0u);
  EXPECT_TRUE(registry.Stat("loose", 0).ok());
  // Above the high watermark again: only the unleased cache version may go.
  ASSERT_TRUE(PublishBytes(registry, "trigger", 100, Retention::kDefault).ok());
  EXPECT_EQ(registry.evictions(), 1u);
  EXPECT_TRUE(registry.Stat("held", 0).ok());
  EXPECT_EQ(registry.Stat("loose", 0).status().code(), absl::StatusCode::kNotFound);
  // No room and nothing evictable: the put is refused, naming the request.
  absl::StatusOr<VersionInfo> refused = PublishBytes(registry, "big", 700, Retention::kCache);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("700 bytes"), std::string::npos) << refused.status();
  EXPECT_EQ((*lease)->buffer->data()[399], 7);
}

TEST(RegistryTest, EvictionThatCannotReachItsTargetEvictsNothing) {
  // Durable bytes keep use above the high watermark whatever is evicted: the
  // cache is left alone instead of being emptied for no gain.
  Registry registry(SmallRegistry(0.5, 0.1));
  ASSERT_TRUE(PublishBytes(registry, "cached", 100, Retention::kCache).ok());
  ASSERT_TRUE(PublishBytes(registry, "durable", 600, Retention::kDefault).ok());
  EXPECT_EQ(registry.evictions(), 0u);
  EXPECT_TRUE(registry.Stat("cached", 0).ok());
  // A put that would not fit even after evicting every cache version is
  // refused without evicting any.
  EXPECT_EQ(PublishBytes(registry, "huge", 450, Retention::kDefault).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(registry.evictions(), 0u);
  EXPECT_TRUE(registry.Stat("cached", 0).ok());
  // One that fits once the cache version goes evicts it.
  EXPECT_TRUE(PublishBytes(registry, "fits", 350, Retention::kDefault).ok());
  EXPECT_EQ(registry.evictions(), 1u);
}

TEST(RegistryTest, PutThatDoesNotFitEvictsCacheVersionsFirst) {
  Registry registry(SmallRegistry(1.0, 1.0));  // no watermark eviction
  ASSERT_TRUE(PublishBytes(registry, "cached", 600, Retention::kCache).ok());
  ASSERT_TRUE(PublishBytes(registry, "needed", 600, Retention::kDefault).ok());
  EXPECT_EQ(registry.evictions(), 1u);
  EXPECT_EQ(registry.Stat("cached", 0).status().code(), absl::StatusCode::kNotFound);
  // Default and pinned versions are never evicted to make room.
  ASSERT_TRUE(PublishBytes(registry, "pinned", 300, Retention::kPinned).ok());
  EXPECT_EQ(PublishBytes(registry, "more", 200, Retention::kDefault).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(registry.evictions(), 1u);
  EXPECT_TRUE(registry.Stat("needed", 0).ok());
  EXPECT_TRUE(registry.Stat("pinned", 0).ok());
}

TEST(RegistryTest, StatShowsRetentionAndAcquireDurableSkipsCache) {
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(PublishBytes(registry, "d", 8, Retention::kDefault).ok());
  ASSERT_TRUE(PublishBytes(registry, "p", 8, Retention::kPinned).ok());
  ASSERT_TRUE(PublishBytes(registry, "c", 8, Retention::kCache).ok());
  EXPECT_EQ(registry.Stat("d", 0)->retention, Retention::kDefault);
  EXPECT_EQ(registry.Stat("p", 0)->retention, Retention::kPinned);
  EXPECT_EQ(registry.Stat("c", 0)->retention, Retention::kCache);
  std::vector<Lease> durable = registry.AcquireDurable();
  ASSERT_EQ(durable.size(), 2u);
  EXPECT_EQ(durable[0]->name, "d");
  EXPECT_EQ(durable[1]->name, "p");
  EXPECT_EQ(registry.Stat("d", 0)->open_leases, 1u);
}

TEST(RegistryTest, RestoredVersionsKeepTheirNumbersAndLaterPutsGoAbove) {
  Registry registry(RegistryOptions{});
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{dlpack::kUInt, 8, 1};
  layout.shape = {4};
  absl::StatusOr<PendingVersion> pending = registry.Prepare("r", layout, 4);
  ASSERT_TRUE(pending.ok());
  pending->restored_version = 42;
  pending->created_at = absl::FromUnixSeconds(1'700'000'000);
  absl::StatusOr<VersionInfo> restored = registry.Publish(std::move(*pending));
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->version, 42u);
  EXPECT_EQ(restored->created, absl::FromUnixSeconds(1'700'000'000));
  absl::StatusOr<VersionInfo> next = PublishBytes(registry, "n", 4, Retention::kDefault);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->version, 43u);
  // A restored number at or below what exists would alias a version.
  pending = registry.Prepare("old", layout, 4);
  ASSERT_TRUE(pending.ok());
  pending->restored_version = 10;
  absl::StatusOr<VersionInfo> stale = registry.Publish(std::move(*pending));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.status().message().find("version 10"), std::string::npos) << stale.status();
}

// Writers fill the registry with cache versions (forcing eviction all the
// time) while readers lease and check them: a leased version's bytes never
// change or vanish. TSan runs this (name matches RegistryTest).
TEST(RegistryTest, ConcurrentEvictionNeverTakesLeasedBytes) {
  RegistryOptions options;
  options.max_host_bytes = 64 * 1024;
  options.eviction_high_watermark = 0.75;
  options.eviction_low_watermark = 0.5;
  Registry registry(options);
  constexpr int kWriters = 3, kReaders = 3, kIterations = 300, kNames = 16;
  std::atomic<int> mismatches{0};
  std::atomic<int> unexpected_errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kIterations; ++i) {
        const int name = (w * 7 + i) % kNames;
        const uint8_t fill = static_cast<uint8_t>(name * 13 + 1);
        absl::StatusOr<VersionInfo> put =
            PublishBytes(registry, absl::StrCat("n", name), 4096, Retention::kCache, fill);
        if (!put.ok() && put.status().code() != absl::StatusCode::kResourceExhausted) {
          ++unexpected_errors;
        }
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < kIterations; ++i) {
        const int name = (r * 5 + i) % kNames;
        absl::StatusOr<Lease> lease = registry.Acquire(absl::StrCat("n", name), 0);
        if (!lease.ok()) continue;  // evicted or not yet put
        const uint8_t expected = static_cast<uint8_t>(name * 13 + 1);
        const uint8_t* bytes = (*lease)->buffer->data();
        for (int k = 0; k < 4096; k += 512) {
          if (bytes[k] != expected) ++mismatches;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(unexpected_errors.load(), 0);
  EXPECT_GT(registry.evictions(), 0u);
  EXPECT_LE(registry.host_bytes_used(), options.max_host_bytes);
}

}  // namespace
}  // namespace tensord
