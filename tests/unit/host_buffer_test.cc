#include "service/memory/host_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "gtest/gtest.h"

namespace tensord {
namespace {

TEST(HostBufferTest, SealedBytesCannotChange) {
  auto buffer = HostBuffer::Create(8192, "test");
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const std::vector<uint8_t> bytes(8192, 0x5a);
  ASSERT_TRUE((*buffer)->Write(0, bytes.data(), bytes.size()).ok());
  ASSERT_TRUE((*buffer)->Seal().ok());
  EXPECT_EQ((*buffer)->Write(0, bytes.data(), 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*buffer)->data()[8191], 0x5a);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*buffer)->data()) % 256, 0u);
  int fd = (*buffer)->fd();
  int seals = fcntl(fd, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  // Neither a write nor a writable shared mapping nor a resize is allowed.
  char byte = 1;
  EXPECT_EQ(pwrite(fd, &byte, 1, 0), -1);
  EXPECT_EQ(mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  EXPECT_EQ(ftruncate(fd, 4096), -1);
  EXPECT_EQ((*buffer)->data()[0], 0x5a);
}

// A buffer of normal pages is written through its fd (no writable
// mapping): ReadFrom leaves the copy to its caller.
TEST(HostBufferTest, ReadFromIsLeftToTheCallerWithoutAWritableMapping) {
  auto buffer = HostBuffer::Create(8192, "read-from");
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const int file = ::memfd_create("source", MFD_CLOEXEC);
  ASSERT_GE(file, 0);
  ASSERT_EQ(::ftruncate(file, 8192), 0);
  EXPECT_EQ((*buffer)->ReadFrom(file, 0, 0, 8192).code(), absl::StatusCode::kUnimplemented);
  ::close(file);
}

TEST(HostBufferTest, PiecewiseWritesLandInOrderAndUnwrittenBytesAreZero) {
  constexpr uint64_t kSize = 3 * 4096 + 100;
  auto buffer = HostBuffer::Create(kSize, "pieces");
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  // Pieces of odd sizes, one empty, straddling page boundaries; more pieces
  // than one pwritev batch (or IOV_MAX) so the write is split across calls.
  std::vector<uint8_t> source(2 * 4096 + 77);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 7 + 1);
  std::vector<std::span<const uint8_t>> pieces;
  size_t at = 0;
  for (size_t i = 0; at < source.size(); ++i) {
    const size_t size = std::min<size_t>(i % 5 == 0 ? 0 : i % 13 + 1, source.size() - at);
    pieces.emplace_back(source.data() + at, size);
    at += size;
  }
  ASSERT_GT(pieces.size(), 1024u);
  const uint64_t offset = 4096 - 33;
  ASSERT_TRUE((*buffer)->Write(offset, pieces).ok());
  EXPECT_EQ((*buffer)->Write(kSize - 10, source.data(), 11).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*buffer)->Write(kSize + 1, source.data(), 0).code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE((*buffer)->Seal().ok());
  const uint8_t* data = (*buffer)->data();
  for (uint64_t i = 0; i < kSize; ++i) {
    const uint8_t expected =
        i >= offset && i < offset + source.size() ? source[i - offset] : uint8_t{0};
    ASSERT_EQ(data[i], expected) << "byte " << i;
  }
}

TEST(HostBufferTest, AllocatePagesBacksEveryPageBeforeAnyWrite) {
  constexpr uint64_t kSize = 64 * 4096 + 1;
  auto buffer = HostBuffer::Create(kSize, "allocated");
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  struct stat before {};
  ASSERT_EQ(fstat((*buffer)->fd(), &before), 0);
  EXPECT_EQ(before.st_blocks, 0);  // nothing allocated until written
  ASSERT_TRUE((*buffer)->AllocatePages().ok());
  struct stat after {};
  ASSERT_EQ(fstat((*buffer)->fd(), &after), 0);
  EXPECT_GE(static_cast<uint64_t>(after.st_blocks) * 512, kSize);
  ASSERT_TRUE((*buffer)->Seal().ok());
  EXPECT_EQ((*buffer)->AllocatePages().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*buffer)->data()[kSize - 1], 0);
}

TEST(HostBufferTest, ZeroSizeHasValidPointer) {
  auto buffer = HostBuffer::Create(0, "empty");
  ASSERT_TRUE(buffer.ok());
  EXPECT_NE((*buffer)->data(), nullptr);
  EXPECT_TRUE((*buffer)->Seal().ok());
  EXPECT_NE((*buffer)->data(), nullptr);
  EXPECT_EQ((*buffer)->size(), 0u);
}

}  // namespace
}  // namespace tensord

namespace tensord {
namespace {

TEST(HostBufferTest, HugePagesWhenThePoolHasRoomElseNormalPages) {
  auto buffer = HostBuffer::Create(3 << 20, "huge", PagePolicy::kHugeWhenAvailable);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  if ((*buffer)->huge_pages()) {
    EXPECT_EQ((*buffer)->mapping_size(), 4u << 20);
  } else {
    EXPECT_EQ((*buffer)->mapping_size(), 3u << 20);  // fallback: the pool is empty here
  }
  const std::vector<uint8_t> bytes(3 << 20, 7);
  ASSERT_TRUE((*buffer)->Write(0, bytes.data(), bytes.size()).ok());
  ASSERT_TRUE((*buffer)->Seal().ok());
  EXPECT_EQ((*buffer)->data()[(3 << 20) - 1], 7);
  EXPECT_EQ((*buffer)->size(), 3u << 20);
}

TEST(HostBufferTest, SealRefusedWhileAnotherMappingIsWritable) {
  auto buffer = HostBuffer::Create(4096, "busy");
  ASSERT_TRUE(buffer.ok());
  void* other = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, (*buffer)->fd(), 0);
  ASSERT_NE(other, MAP_FAILED);
  EXPECT_EQ((*buffer)->Seal().code(), absl::StatusCode::kFailedPrecondition);
  munmap(other, 4096);
}

TEST(HostBufferTest, SealRefusedWhenTheProducerResizedTheMemfd) {
  auto buffer = HostBuffer::Create(8192, "resized");
  ASSERT_TRUE(buffer.ok());
  ASSERT_EQ(ftruncate((*buffer)->fd(), 4096), 0);
  absl::Status sealed = (*buffer)->Seal();
  EXPECT_EQ(sealed.code(), absl::StatusCode::kFailedPrecondition) << sealed;
}

}  // namespace
}  // namespace tensord
