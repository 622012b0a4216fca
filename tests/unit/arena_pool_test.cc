#include "service/memory/arena_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/common/fd_limits.h"
#include "service/common/scoped_fd.h"

namespace tensord {
namespace {

constexpr uint64_t kPage = 4096;

ArenaPoolOptions SmallArenas() {
  ArenaPoolOptions options;
  options.min_arena_bytes = 64 * kPage;  // 16 slots of 4 KiB... or more for small classes
  options.min_slots_per_arena = 4;
  return options;
}

std::unique_ptr<ArenaSlot> Filled(ArenaPool& pool, uint64_t size, uint8_t value,
                                  const std::string& domain = "") {
  absl::StatusOr<std::unique_ptr<ArenaSlot>> slot = pool.Allocate(size, domain);
  EXPECT_TRUE(slot.ok()) << slot.status();
  if (!slot.ok()) return nullptr;
  std::vector<uint8_t> bytes(size, value);
  EXPECT_TRUE((*slot)->Write(0, bytes.data(), bytes.size()).ok());
  EXPECT_TRUE((*slot)->Seal().ok());
  return *std::move(slot);
}

TEST(ArenaPoolTest, SizeClassesWasteAtMostAQuarterPlusAPage) {
  ArenaPool pool(ArenaPoolOptions{});
  const std::vector<uint64_t>& classes = pool.size_classes();
  ASSERT_FALSE(classes.empty());
  EXPECT_EQ(classes.front(), kPage);
  EXPECT_EQ(classes.back(), uint64_t{1} << 20);
  EXPECT_TRUE(std::is_sorted(classes.begin(), classes.end()));
  for (uint64_t size : {uint64_t{0}, uint64_t{1}, kPage, kPage + 1, uint64_t{5000}, uint64_t{65536},
                        uint64_t{100'000}, uint64_t{777'777}, uint64_t{1} << 20}) {
    const uint64_t slot = pool.SlotBytesFor(size);
    EXPECT_GE(slot, size);
    EXPECT_EQ(slot % kPage, 0u);
    EXPECT_LE(slot, size + size / 4 + kPage) << size;
  }
  EXPECT_EQ(pool.SlotBytesFor((uint64_t{1} << 20) + 1), 0u);
  // The flag is a bound: rounded down to a page, never up.
  EXPECT_EQ(ArenaPool(ArenaPoolOptions{.max_slot_bytes = kPage - 1}).SlotBytesFor(1), 0u);
  ArenaPool odd(ArenaPoolOptions{.max_slot_bytes = (uint64_t{1} << 20) + 1});
  EXPECT_EQ(odd.size_classes().back(), uint64_t{1} << 20);
  EXPECT_EQ(odd.SlotBytesFor((uint64_t{1} << 20) + 1), 0u);
  EXPECT_TRUE(ArenaPool::Supported());  // Linux >= 5.1 here
  ArenaPool off(ArenaPoolOptions{.max_slot_bytes = 0});
  EXPECT_EQ(off.SlotBytesFor(1), 0u);
  EXPECT_EQ(off.Allocate(1, "").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ArenaPoolTest, SlotsAreZeroedWritableUntilSealedAndBounded) {
  ArenaPool pool(SmallArenas());
  absl::StatusOr<std::unique_ptr<ArenaSlot>> slot = pool.Allocate(5000, "");
  ASSERT_TRUE(slot.ok()) << slot.status();
  ArenaSlot& bytes = **slot;
  EXPECT_EQ(bytes.size(), 5000u);
  EXPECT_EQ(bytes.slot_bytes(), 8192u);
  EXPECT_NE(bytes.arena_id(), 0u);
  EXPECT_EQ(bytes.mapping_offset() % kPage, 0u);
  EXPECT_GE(bytes.mapping_size(), bytes.mapping_offset() + bytes.slot_bytes());
  EXPECT_TRUE(std::all_of(bytes.data(), bytes.data() + 5000, [](uint8_t b) { return b == 0; }));
  const uint8_t one[3] = {1, 2, 3};
  EXPECT_EQ(bytes.Write(4998, one, 3).code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(bytes.Write(4997, one, 3).ok());
  ASSERT_TRUE(bytes.Seal().ok());
  EXPECT_EQ(bytes.Write(0, one, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(bytes.data()[4999], 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % kPage, 0u);
}

// ReadFrom preads a file's bytes straight into the slot: a hole reads as
// zeros, a file that ends first and a range past the slot are errors, and
// a sealed slot takes nothing.
TEST(ArenaPoolTest, ReadFromPreadsAFileIntoTheSlot) {
  ArenaPool pool(SmallArenas());
  absl::StatusOr<std::unique_ptr<ArenaSlot>> slot = pool.Allocate(20000, "");
  ASSERT_TRUE(slot.ok()) << slot.status();
  ArenaSlot& bytes = **slot;
  ScopedFd file(::memfd_create("read-from", MFD_CLOEXEC));
  ASSERT_TRUE(file.valid());
  std::vector<uint8_t> pattern(10000);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_EQ(::pwrite(file.get(), pattern.data(), pattern.size(), 100),
            static_cast<ssize_t>(pattern.size()));
  ASSERT_EQ(::ftruncate(file.get(), 30000), 0);  // bytes 10100.. are a hole

  ASSERT_TRUE(bytes.ReadFrom(file.get(), 100, 10, 15000).ok());
  // Past the file's end (into slot bytes the checks below leave alone).
  const absl::Status past_end = bytes.ReadFrom(file.get(), 28000, 16000, 3000);
  EXPECT_EQ(past_end.code(), absl::StatusCode::kInvalidArgument) << past_end;
  EXPECT_NE(past_end.message().find("ends at offset 30000"), std::string::npos) << past_end;
  EXPECT_EQ(bytes.ReadFrom(file.get(), 0, 19000, 1001).code(), absl::StatusCode::kOutOfRange);
  EXPECT_FALSE(bytes.ReadFrom(-1, 0, 0, 1).ok());
  ASSERT_TRUE(bytes.Seal().ok());
  EXPECT_EQ(bytes.ReadFrom(file.get(), 0, 0, 1).code(), absl::StatusCode::kFailedPrecondition);

  for (size_t i = 0; i < 15000; ++i) {
    const uint8_t expected = i < pattern.size() ? pattern[i] : 0;
    ASSERT_EQ(bytes.data()[10 + i], expected) << i;
  }
  EXPECT_EQ(bytes.data()[0], 0);
}

TEST(ArenaPoolTest, AFreedSlotIsReusedZeroedAndNeverWhileHeld) {
  ArenaPool pool(SmallArenas());
  std::unique_ptr<ArenaSlot> held = Filled(pool, kPage, 0xaa);
  std::unique_ptr<ArenaSlot> freed = Filled(pool, kPage, 0xbb);
  ASSERT_NE(held, nullptr);
  ASSERT_NE(freed, nullptr);
  const uint64_t freed_offset = freed->mapping_offset();
  EXPECT_NE(held->mapping_offset(), freed_offset);
  const uint8_t* freed_bytes = freed->data();  // the arena stays mapped: `held` is in it
  freed.reset();
  // Zeroed as it is freed: a deleted version is not left for fd holders.
  EXPECT_TRUE(std::all_of(freed_bytes, freed_bytes + kPage, [](uint8_t b) { return b == 0; }));
  std::unique_ptr<ArenaSlot> again = *pool.Allocate(kPage, "");
  EXPECT_EQ(again->mapping_offset(), freed_offset);
  EXPECT_TRUE(std::all_of(again->data(), again->data() + kPage, [](uint8_t b) { return b == 0; }));
  // Churn every other slot; the held one keeps its bytes.
  for (int round = 0; round < 100; ++round) {
    std::unique_ptr<ArenaSlot> churn = Filled(pool, kPage, static_cast<uint8_t>(round));
    ASSERT_NE(churn, nullptr);
    EXPECT_NE(churn->mapping_offset(), held->mapping_offset());
  }
  EXPECT_TRUE(std::all_of(held->data(), held->data() + kPage, [](uint8_t b) { return b == 0xaa; }));
}

TEST(ArenaPoolTest, NoHolderOfTheFdCanChangeAByte) {
  ArenaPool pool(SmallArenas());
  std::unique_ptr<ArenaSlot> slot = Filled(pool, kPage, 0x5a);
  ASSERT_NE(slot, nullptr);
  const int fd = slot->fd();
  const off_t offset = static_cast<off_t>(slot->mapping_offset());
  const uint8_t byte = 1;
  errno = 0;
  EXPECT_EQ(::pwrite(fd, &byte, 1, offset), -1);
  EXPECT_EQ(errno, EPERM);
  // Reopened read-write through /proc, as a peer given the fd could.
  ScopedFd reopened(::open(absl::StrCat("/proc/self/fd/", fd).c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(reopened.valid()) << std::strerror(errno);
  errno = 0;
  EXPECT_EQ(::pwrite(reopened.get(), &byte, 1, offset), -1);
  EXPECT_EQ(errno, EPERM);
  errno = 0;
  EXPECT_EQ(::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, reopened.get(), offset),
            MAP_FAILED);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(reopened.get(), 0), 0);
  EXPECT_NE(::fallocate(reopened.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                        static_cast<off_t>(kPage)),
            0);
  EXPECT_NE(::fcntl(reopened.get(), F_ADD_SEALS, F_SEAL_WRITE), 0);
  // A private mapping may be written; the change stays in it.
  void* copy = ::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE, reopened.get(), offset);
  ASSERT_NE(copy, MAP_FAILED);
  static_cast<uint8_t*>(copy)[0] = 0;
  ::munmap(copy, kPage);
  EXPECT_TRUE(std::all_of(slot->data(), slot->data() + kPage, [](uint8_t b) { return b == 0x5a; }));
}

TEST(ArenaPoolTest, DomainsAndSizeClassesNeverShareAnArena) {
  ArenaPool pool(SmallArenas());
  std::unique_ptr<ArenaSlot> a = Filled(pool, kPage, 1, "team-a/\n");
  std::unique_ptr<ArenaSlot> a2 = Filled(pool, kPage, 2, "team-a/\n");
  std::unique_ptr<ArenaSlot> b = Filled(pool, kPage, 3, "team-b/\n");
  std::unique_ptr<ArenaSlot> bigger = Filled(pool, 3 * kPage, 4, "team-a/\n");
  EXPECT_EQ(a->arena_id(), a2->arena_id());
  EXPECT_NE(a->arena_id(), b->arena_id());
  EXPECT_NE(a->arena_id(), bigger->arena_id());
  EXPECT_EQ(pool.Stats().arenas, 3u);
}

TEST(ArenaPoolTest, FdsGrowWithArenasNotSlotsAndEmptyArenasAreReleased) {
  ArenaPoolOptions options;  // 16 MiB arenas: 4096 slots of 4 KiB
  ArenaPool pool(options);
  const size_t fds_before = OpenFileCount();
  std::vector<std::unique_ptr<ArenaSlot>> slots;
  constexpr int kSlots = 10'000;
  for (int i = 0; i < kSlots; ++i) {
    absl::StatusOr<std::unique_ptr<ArenaSlot>> slot = pool.Allocate(kPage, "");
    ASSERT_TRUE(slot.ok()) << i << ": " << slot.status();
    slots.push_back(*std::move(slot));
  }
  ArenaStats stats = pool.Stats();
  EXPECT_EQ(stats.arenas, 3u);
  EXPECT_EQ(stats.slots_used, static_cast<uint64_t>(kSlots));
  EXPECT_EQ(stats.slot_bytes_used, kSlots * kPage);
  EXPECT_EQ(OpenFileCount(), fds_before + 3);
  slots.clear();
  stats = pool.Stats();
  EXPECT_EQ(stats.slots_used, 0u);
  EXPECT_EQ(stats.arenas, 1u);  // one empty arena stays for the next puts
  EXPECT_EQ(OpenFileCount(), fds_before + 1);
}

TEST(ArenaPoolTest, SlotsOutliveThePool) {
  std::unique_ptr<ArenaSlot> survivor;
  {
    ArenaPool pool(SmallArenas());
    survivor = Filled(pool, kPage, 7);
    std::unique_ptr<ArenaSlot> other = Filled(pool, kPage, 8);
  }
  ASSERT_NE(survivor, nullptr);
  EXPECT_EQ(survivor->data()[kPage - 1], 7);
  survivor.reset();  // returns itself to a closed pool: no crash, no leak (ASan)
}

TEST(ArenaPoolTest, ConcurrentAllocateAndFreeKeepEverySlotsBytes) {
  ArenaPool pool(SmallArenas());
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, &wrong, t] {
      std::vector<std::unique_ptr<ArenaSlot>> held;
      for (int round = 0; round < kRounds; ++round) {
        const uint64_t size = kPage * (1 + (round + t) % 3);
        const uint8_t value = static_cast<uint8_t>(t * 16 + round % 16);
        absl::StatusOr<std::unique_ptr<ArenaSlot>> slot = pool.Allocate(size, "");
        if (!slot.ok()) {
          ++wrong[t];
          continue;
        }
        std::vector<uint8_t> bytes(size, value);
        (void)(*slot)->Write(0, bytes.data(), size);
        (void)(*slot)->Seal();
        held.push_back(*std::move(slot));
        if (held.size() > 8) {
          const ArenaSlot& oldest = *held.front();
          const uint8_t expected = oldest.data()[0];
          if (!std::all_of(oldest.data(), oldest.data() + oldest.size(),
                           [expected](uint8_t b) { return b == expected; })) {
            ++wrong[t];
          }
          held.erase(held.begin());
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  EXPECT_EQ(pool.Stats().slots_used, 0u);
}

}  // namespace
}  // namespace tensord
