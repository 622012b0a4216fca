#include "service/registry/spare_buffers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/common/crc32c.h"
#include "service/registry/registry.h"

namespace tensord {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

SpareBufferOptions Keeping(uint64_t max_bytes) {
  SpareBufferOptions options;
  options.max_bytes = max_bytes;
  return options;
}

// A sealed buffer of `size` bytes, all `value`, from `spares`: a kept one
// when there is one (its room in the budget is dropped here, as a put
// would hold it), else a new one.
std::unique_ptr<HostBuffer> Filled(SpareBuffers& spares, uint64_t size, uint8_t value,
                                   const std::string& domain = "") {
  std::unique_ptr<HostBuffer> buffer;
  if (std::optional<SpareBuffers::Reused> reused = spares.Take(size, domain)) {
    EXPECT_EQ(reused->reservation.bytes(), size);
    buffer = std::move(reused->buffer);
  } else {
    absl::StatusOr<std::unique_ptr<HostBuffer>> created = spares.Create(size, "test", domain);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return nullptr;
    buffer = *std::move(created);
  }
  const std::vector<uint8_t> bytes(size, value);
  EXPECT_TRUE(buffer->Write(0, bytes.data(), bytes.size()).ok());
  EXPECT_TRUE(buffer->Seal().ok());
  return buffer;
}

ino_t InodeOf(int fd) {
  struct stat status {};
  EXPECT_EQ(::fstat(fd, &status), 0);
  return status.st_ino;
}

bool AllEqual(const uint8_t* data, uint64_t size, uint8_t value) {
  for (uint64_t i = 0; i < size; ++i) {
    if (data[i] != value) return false;
  }
  return true;
}

TEST(SpareBuffersTest, AGoneBuffersMemfdServesTheNextPutOfItsSizeAndDomain) {
  auto capacity = CapacityAccount::Create(64 * kMiB, "test budget");
  auto spares = SpareBuffers::Create(Keeping(16 * kMiB), capacity);
  std::unique_ptr<HostBuffer> first = Filled(*spares, 2 * kMiB, 0x11);
  ASSERT_NE(first, nullptr);
  const ino_t inode = InodeOf(first->fd());
  first.reset();
  EXPECT_EQ(spares->Stats().buffers, 1u);
  EXPECT_EQ(spares->Stats().bytes, 2 * kMiB);
  EXPECT_EQ(capacity->used_bytes(), 2 * kMiB);  // kept spares are charged

  // Another size and another domain get new memfds.
  std::unique_ptr<HostBuffer> other_size = Filled(*spares, 3 * kMiB, 0x22);
  std::unique_ptr<HostBuffer> other_domain = Filled(*spares, 2 * kMiB, 0x33, "tenant-b");
  EXPECT_NE(InodeOf(other_size->fd()), inode);
  EXPECT_NE(InodeOf(other_domain->fd()), inode);
  EXPECT_EQ(spares->Stats().reuses, 0u);

  std::unique_ptr<HostBuffer> second = Filled(*spares, 2 * kMiB, 0x44);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(InodeOf(second->fd()), inode);
  EXPECT_EQ(spares->Stats().reuses, 1u);
  EXPECT_EQ(spares->Stats().buffers, 0u);
  EXPECT_EQ(capacity->used_bytes(), 0u);  // its room went with it
  EXPECT_TRUE(second->sealed());
  EXPECT_TRUE(AllEqual(second->data(), second->size(), 0x44));
  EXPECT_EQ(second->mapping_size(), 2 * kMiB);
}

TEST(SpareBuffersTest, NoOtherProcessOrFdCanWriteARecyclableMemfd) {
  auto spares = SpareBuffers::Create(Keeping(16 * kMiB), CapacityAccount::Create(64 * kMiB, "b"));
  std::unique_ptr<HostBuffer> buffer = Filled(*spares, kMiB, 0x5a);
  ASSERT_NE(buffer, nullptr);
  const int fd = buffer->fd();
  // What a reader is handed: the fd, reopened writable through /proc too.
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const int reopened = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  for (int candidate : {fd, reopened}) {
    if (candidate < 0) continue;
    EXPECT_EQ(::mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, candidate, 0), MAP_FAILED);
    EXPECT_EQ(errno, EPERM);
    const uint8_t byte = 0;
    EXPECT_EQ(::pwrite(candidate, &byte, 1, 0), -1);
    EXPECT_EQ(::ftruncate(candidate, 0), -1);
  }
  if (reopened >= 0) ::close(reopened);
  void* readable = ::mmap(nullptr, kMiB, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(readable, MAP_FAILED);
  EXPECT_NE(::mprotect(readable, kMiB, PROT_READ | PROT_WRITE), 0);
  ::munmap(readable, kMiB);
  EXPECT_TRUE(AllEqual(buffer->data(), kMiB, 0x5a));

  // The same holds after the memfd served a second put.
  buffer.reset();
  buffer = Filled(*spares, kMiB, 0x6b);
  ASSERT_EQ(spares->Stats().reuses, 1u);
  EXPECT_EQ(::mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, buffer->fd(), 0), MAP_FAILED);
  EXPECT_TRUE(AllEqual(buffer->data(), kMiB, 0x6b));
}

TEST(SpareBuffersTest, KeepsAtMostItsBytesAndCountNewestFirst) {
  auto capacity = CapacityAccount::Create(64 * kMiB, "b");
  SpareBufferOptions options = Keeping(5 * kMiB);
  options.max_buffers = 3;
  auto spares = SpareBuffers::Create(options, capacity);
  std::vector<std::unique_ptr<HostBuffer>> buffers;
  for (uint64_t size : {kMiB, kMiB + 1, kMiB + 2, 2 * kMiB}) {
    buffers.push_back(Filled(*spares, size, 1));
  }
  for (auto& buffer : buffers) buffer.reset();  // oldest first
  // 4 would exceed 3 buffers, and the 2 MiB one 5 MiB: the oldest went.
  EXPECT_EQ(spares->Stats().buffers, 3u);
  EXPECT_LE(spares->Stats().bytes, 5 * kMiB);
  EXPECT_EQ(capacity->used_bytes(), spares->Stats().bytes);
  Filled(*spares, 2 * kMiB, 2).reset();  // the newest is there to take
  EXPECT_EQ(spares->Stats().reuses, 1u);
  // Too large to keep at all.
  Filled(*spares, 6 * kMiB, 3).reset();
  EXPECT_LE(spares->Stats().bytes, 5 * kMiB);
}

TEST(SpareBuffersTest, ReleaseGivesBytesBackAndABudgetWithoutRoomKeepsNone) {
  auto capacity = CapacityAccount::Create(4 * kMiB, "b");
  auto spares = SpareBuffers::Create(Keeping(16 * kMiB), capacity);
  Filled(*spares, kMiB, 1).reset();
  Filled(*spares, 2 * kMiB, 1).reset();
  EXPECT_EQ(capacity->used_bytes(), 3 * kMiB);
  EXPECT_EQ(spares->Release(1), 2 * kMiB);  // largest first
  EXPECT_EQ(capacity->used_bytes(), kMiB);
  EXPECT_EQ(spares->Release(UINT64_MAX), kMiB);
  EXPECT_EQ(capacity->used_bytes(), 0u);
  EXPECT_EQ(spares->Stats().buffers, 0u);

  absl::StatusOr<ByteReservation> held = capacity->Reserve(3 * kMiB + 1);
  ASSERT_TRUE(held.ok());
  Filled(*spares, kMiB, 1).reset();  // no room in the budget: freed
  EXPECT_EQ(spares->Stats().buffers, 0u);
}

TEST(SpareBuffersTest, SparesIdleForTheReleaseDelayAreFreed) {
  auto capacity = CapacityAccount::Create(64 * kMiB, "b");
  SpareBufferOptions options = Keeping(16 * kMiB);
  options.idle_release = absl::Milliseconds(500);
  auto spares = SpareBuffers::Create(options, capacity);
  const absl::Time kept_at = absl::Now();
  Filled(*spares, kMiB, 1).reset();
  const bool still_kept = spares->Stats().buffers == 1;
  if (absl::Now() - kept_at < absl::Milliseconds(400)) EXPECT_TRUE(still_kept);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (spares->Stats().buffers != 0 && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(spares->Stats().buffers, 0u);
  EXPECT_EQ(capacity->used_bytes(), 0u);  // given back with the count, under one lock
}

TEST(SpareBuffersTest, ABufferOutlivingItsSparesIsFreed) {
  auto spares = SpareBuffers::Create(Keeping(16 * kMiB), CapacityAccount::Create(64 * kMiB, "b"));
  std::unique_ptr<HostBuffer> buffer = Filled(*spares, kMiB, 1);
  spares.reset();
  buffer.reset();  // nowhere to go: unmapped and closed, no crash
}

absl::StatusOr<VersionInfo> PutBytes(Registry& registry, const std::string& name, uint64_t size,
                                     uint8_t value) {
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{dlpack::kUInt, 8, 1};
  layout.shape = {static_cast<int64_t>(size)};
  absl::StatusOr<PendingVersion> pending = registry.Prepare(name, layout, size);
  if (!pending.ok()) return pending.status();
  const std::vector<uint8_t> bytes(size, value);
  if (absl::Status written = pending->buffer->Write(0, bytes.data(), size); !written.ok()) {
    return written;
  }
  return registry.Publish(*std::move(pending));
}

RegistryOptions WithSpares(uint64_t max_host_bytes) {
  RegistryOptions options;
  options.max_host_bytes = max_host_bytes;
  options.spare_buffers.max_bytes = max_host_bytes;
  return options;
}

TEST(SpareBuffersTest, RegistryReusesAReplacedVersionsMemfdOnlyOnceNoLeaseHoldsIt) {
  Registry registry(WithSpares(64 * kMiB));
  ASSERT_TRUE(PutBytes(registry, "w", 2 * kMiB, 1).ok());
  absl::StatusOr<Lease> held = registry.Acquire("w", 0);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(PutBytes(registry, "w", 2 * kMiB, 2).ok());
  // Version 1 is replaced but leased: its bytes stay, nothing is kept.
  EXPECT_EQ(registry.Stats().spare_buffers.buffers, 0u);
  ASSERT_TRUE(PutBytes(registry, "w", 2 * kMiB, 3).ok());  // replaces 2: kept
  EXPECT_EQ(registry.Stats().spare_buffers.buffers, 1u);
  EXPECT_TRUE(AllEqual((*held)->buffer->data(), 2 * kMiB, 1));

  absl::StatusOr<VersionInfo> fourth = PutBytes(registry, "w", 2 * kMiB, 4);  // into 2's memfd
  ASSERT_TRUE(fourth.ok());
  EXPECT_EQ(registry.Stats().spare_buffers.reuses, 1u);
  EXPECT_TRUE(AllEqual((*held)->buffer->data(), 2 * kMiB, 1));
  absl::StatusOr<Lease> latest = registry.Acquire("w", 0);
  ASSERT_TRUE(latest.ok());
  EXPECT_TRUE(AllEqual((*latest)->buffer->data(), 2 * kMiB, 4));
  EXPECT_EQ((*latest)->crc32c, Crc32c((*latest)->buffer->data(), 2 * kMiB));
  held->Reset();  // version 1 goes now
  EXPECT_EQ(registry.Stats().spare_buffers.buffers, 2u);
}

TEST(SpareBuffersTest, RegistryGivesSpareRoomToAPutBeforeRefusingIt) {
  Registry registry(WithSpares(8 * kMiB));
  ASSERT_TRUE(PutBytes(registry, "a", 4 * kMiB, 1).ok());
  ASSERT_TRUE(registry.Delete("a", 0).ok());
  EXPECT_EQ(registry.Stats().spare_buffers.bytes, 4 * kMiB);
  EXPECT_EQ(registry.host_bytes_used(), 0u);  // tensors only
  // 6 MiB fits only once the spare gives its 4 MiB back.
  absl::StatusOr<VersionInfo> big = PutBytes(registry, "b", 6 * kMiB, 2);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(registry.Stats().spare_buffers.buffers, 0u);
  EXPECT_EQ(registry.host_bytes_used(), 6 * kMiB);
}

TEST(SpareBuffersTest, AFullBudgetStillReusesTheSpareItHolds) {
  // Room for the live version and one spare only: the third put takes the
  // spare with its room, rather than freeing it to find room.
  Registry registry(WithSpares(8 * kMiB));
  ASSERT_TRUE(PutBytes(registry, "w", 4 * kMiB, 1).ok());
  ASSERT_TRUE(PutBytes(registry, "w", 4 * kMiB, 2).ok());
  ASSERT_EQ(registry.Stats().spare_buffers.buffers, 1u);
  absl::StatusOr<VersionInfo> third = PutBytes(registry, "w", 4 * kMiB, 3);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(registry.Stats().spare_buffers.reuses, 1u);
  EXPECT_EQ(registry.Stats().spare_buffers.buffers, 1u);  // version 2's now
  EXPECT_EQ(registry.host_bytes_used(), 4 * kMiB);
}

absl::StatusOr<VersionInfo> PutCache(Registry& registry, const std::string& name, uint64_t size) {
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{dlpack::kUInt, 8, 1};
  layout.shape = {static_cast<int64_t>(size)};
  absl::StatusOr<PendingVersion> pending = registry.Prepare(name, layout, size, Retention::kCache);
  if (!pending.ok()) return pending.status();
  const std::vector<uint8_t> bytes(size, 9);
  if (absl::Status written = pending->buffer->Write(0, bytes.data(), size); !written.ok()) {
    return written;
  }
  return registry.Publish(*std::move(pending));
}

TEST(SpareBuffersTest, NoCacheVersionIsEvictedToKeepASpare) {
  Registry registry(WithSpares(64 * kMiB));
  ASSERT_TRUE(PutBytes(registry, "gone", 24 * kMiB, 1).ok());
  ASSERT_TRUE(registry.Delete("gone", 0).ok());
  ASSERT_EQ(registry.Stats().spare_buffers.bytes, 24 * kMiB);
  // 48 MiB of cache tensors and the 24 MiB spare exceed 64 MiB (and the
  // 0.9 watermark): the spare goes, no tensor does.
  ASSERT_TRUE(PutCache(registry, "c1", 24 * kMiB).ok());
  ASSERT_TRUE(PutCache(registry, "c2", 23 * kMiB).ok());
  EXPECT_EQ(registry.evictions(), 0u);
  EXPECT_TRUE(registry.Stat("c1", 0).ok());
  EXPECT_TRUE(registry.Stat("c2", 0).ok());
  // A third evicts c1, whose memfd does not then keep the room from c3.
  ASSERT_TRUE(PutCache(registry, "c3", 24 * kMiB).ok());
  EXPECT_EQ(registry.evictions(), 1u);
  EXPECT_LE(registry.host_bytes_used() + registry.Stats().spare_buffers.bytes, 64 * kMiB);
}

TEST(SpareBuffersTest, LocalCreatesAndSmallPutsGetNoRecyclableBuffer) {
  Registry registry(WithSpares(64 * kMiB));
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{dlpack::kUInt, 8, 1};
  layout.shape = {static_cast<int64_t>(2 * kMiB)};
  absl::StatusOr<PendingVersion> created =
      registry.Prepare("made", layout, 2 * kMiB, Retention::kDefault, HostPlacement::kOwnMemfd);
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(registry.Publish(*std::move(created)).ok());
  ASSERT_TRUE(registry.Delete("made", 0).ok());
  ASSERT_TRUE(PutBytes(registry, "small", 512 * 1024 + 1, 1).ok());
  ASSERT_TRUE(registry.Delete("small", 0).ok());
  EXPECT_EQ(registry.Stats().spare_buffers.buffers, 0u);
}

}  // namespace
}  // namespace tensord
