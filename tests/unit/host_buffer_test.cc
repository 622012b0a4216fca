#include "service/memory/host_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "gtest/gtest.h"

namespace tensord {
namespace {

TEST(HostBufferTest, SealedBytesCannotChange) {
  auto buffer = HostBuffer::Create(8192, "test");
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::memset((*buffer)->mutable_data(), 0x5a, 8192);
  ASSERT_TRUE((*buffer)->Seal().ok());
  EXPECT_EQ((*buffer)->mutable_data(), nullptr);
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
