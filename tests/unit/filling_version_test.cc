// FillingVersion, a copy readable while it arrives: readers copy out only
// what was written, never the last byte before Complete, are woken by each
// change, and see a restart (another holder) from byte 0, a failure, or
// the sealed version.
#include "service/registry/filling_version.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "service/registry/registry.h"

namespace tensord {
namespace {

constexpr uint64_t kBytes = 3 << 20;  // a memfd of its own, not an arena slot

dlpack::TensorLayout ByteVector(uint64_t n) {
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{dlpack::kUInt, 8, 1};
  layout.shape = {static_cast<int64_t>(n)};
  return layout;
}

std::vector<uint8_t> Pattern(uint64_t n, uint8_t seed) {
  std::vector<uint8_t> bytes(n);
  for (uint64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + seed);
  return bytes;
}

VersionDescription Described(const std::string& name, uint64_t bytes, uint32_t crc32c = 99) {
  VersionDescription description;
  description.name = name;
  description.layout = ByteVector(bytes);
  description.total_bytes = bytes;
  description.crc32c = crc32c;
  return description;
}

class FillingVersionTest : public ::testing::Test {
 protected:
  PendingVersion Prepared(uint64_t bytes = kBytes) {
    absl::StatusOr<PendingVersion> pending =
        registry_.Prepare("pulled", ByteVector(bytes), bytes, Retention::kCache);
    EXPECT_TRUE(pending.ok()) << pending.status();
    return *std::move(pending);
  }
  Registry registry_{RegistryOptions{}};
};

TEST_F(FillingVersionTest, NothingIsReadableBeforeTheCopyIsAnnounced) {
  FillingVersion filling;
  const FillingVersion::View view = filling.Look();
  EXPECT_EQ(view.announced, nullptr);
  EXPECT_EQ(view.readable, 0u);
  EXPECT_EQ(view.complete, nullptr);
  EXPECT_FALSE(view.failed.has_value());
  EXPECT_FALSE(filling.Borrow(0, 1).has_value());
}

TEST_F(FillingVersionTest, WrittenBytesAreReadableExceptTheLastUntilComplete) {
  FillingVersion filling;
  PendingVersion pending = Prepared();
  ASSERT_TRUE(filling.Begin(Described("pulled", kBytes), *pending.buffer).ok());
  const FillingVersion::View announced = filling.Look();
  ASSERT_NE(announced.announced, nullptr);
  EXPECT_EQ(announced.announced->version, 0u);  // numbered when installed
  EXPECT_EQ(announced.announced->total_bytes, kBytes);
  EXPECT_EQ(announced.readable, 0u);

  const std::vector<uint8_t> bytes = Pattern(kBytes, 3);
  ASSERT_TRUE(pending.buffer->Write(0, bytes.data(), 1 << 20).ok());
  filling.Advance(1 << 20);
  EXPECT_EQ(filling.Look().readable, uint64_t{1} << 20);
  std::optional<FillingVersion::Borrowed> some = filling.Borrow(4096, 8192);
  ASSERT_TRUE(some.has_value());
  EXPECT_EQ(0, std::memcmp(some->data, bytes.data() + 4096, 8192));
  // Past what was written: not yet.
  EXPECT_FALSE(filling.Borrow((1 << 20) - 10, 20).has_value());

  ASSERT_TRUE(pending.buffer->Write(1 << 20, bytes.data() + (1 << 20), kBytes - (1 << 20)).ok());
  filling.Advance(kBytes);
  // Every byte is written, but the last waits for the whole copy's check.
  EXPECT_EQ(filling.Look().readable, kBytes - 1);
  std::optional<FillingVersion::Borrowed> all_but_last = filling.Borrow(0, kBytes - 1);
  ASSERT_TRUE(all_but_last.has_value());
  EXPECT_FALSE(filling.Borrow(0, kBytes).has_value());
  EXPECT_EQ(0, std::memcmp(all_but_last->data, bytes.data(), kBytes - 1));
}

TEST_F(FillingVersionTest, AReaderIsWokenOnceByTheNextChangeAndNotForAnOldOne) {
  FillingVersion filling;
  PendingVersion pending = Prepared();
  const FillingVersion::View before = filling.Look();
  int woken = 0;
  FillingVersion::Wake wake = [&woken] { ++woken; };
  ASSERT_TRUE(filling.WaitPast(before.changes, wake));
  ASSERT_TRUE(filling.Begin(Described("pulled", kBytes), *pending.buffer).ok());
  EXPECT_EQ(woken, 1);
  filling.Advance(100);
  EXPECT_EQ(woken, 1);  // once only
  // A change since the reader looked: it is told to look again, not kept.
  FillingVersion::Wake late = [&woken] { ++woken; };
  EXPECT_FALSE(filling.WaitPast(before.changes, late));
  EXPECT_EQ(woken, 1);
}

TEST_F(FillingVersionTest, AnotherHolderStartsOverAtByteZero) {
  FillingVersion filling;
  PendingVersion first = Prepared();
  ASSERT_TRUE(filling.Begin(Described("pulled", kBytes), *first.buffer).ok());
  filling.Advance(kBytes / 2);
  PendingVersion second = Prepared();
  ASSERT_TRUE(filling.Begin(Described("pulled", kBytes), *second.buffer).ok());
  EXPECT_EQ(filling.Look().readable, 0u);
  // Readers were told the first attempt's layout, size and CRC-32C.
  PendingVersion third = Prepared();
  const absl::Status other = filling.Begin(Described("pulled", kBytes, 7), *third.buffer);
  EXPECT_EQ(other.code(), absl::StatusCode::kDataLoss) << other;
}

// A chunk already borrowed stays valid when the buffer is sealed (its
// memfd remapped) and even freed: the borrow keeps the pages mapped.
TEST_F(FillingVersionTest, BorrowedBytesOutliveTheBufferTheyWereWrittenTo) {
  FillingVersion filling;
  std::optional<FillingVersion::Borrowed> borrowed;
  const std::vector<uint8_t> bytes = Pattern(kBytes, 11);
  {
    PendingVersion pending = Prepared();
    ASSERT_TRUE(filling.Begin(Described("pulled", kBytes), *pending.buffer).ok());
    ASSERT_TRUE(pending.buffer->Write(0, bytes.data(), kBytes).ok());
    filling.Advance(kBytes);
    borrowed = filling.Borrow(0, kBytes - 1);
    ASSERT_TRUE(borrowed.has_value());
    ASSERT_TRUE(pending.buffer->Seal().ok());  // no writable mapping in the way
  }
  filling.Fail(absl::CancelledError("the pull gave up"));
  EXPECT_FALSE(filling.Borrow(0, 1).has_value());
  EXPECT_EQ(0, std::memcmp(borrowed->data, bytes.data(), kBytes - 1));
}

TEST_F(FillingVersionTest, CompleteHandsReadersTheNumberedVersionAndWakesThem) {
  FillingVersion filling;
  PendingVersion pending = Prepared();
  ASSERT_TRUE(filling.Begin(Described("pulled", kBytes), *pending.buffer).ok());
  const std::vector<uint8_t> bytes = Pattern(kBytes, 5);
  ASSERT_TRUE(pending.buffer->Write(0, bytes.data(), kBytes).ok());
  filling.Advance(kBytes);
  bool woken = false;
  FillingVersion::Wake wake = [&woken] { woken = true; };
  ASSERT_TRUE(filling.WaitPast(filling.Look().changes, wake));
  absl::StatusOr<SealedVersion> sealed = registry_.Seal(std::move(pending));
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  std::shared_ptr<const TensorVersion> version = sealed->Share();
  ASSERT_TRUE(registry_.Install(*std::move(sealed)).ok());
  filling.Complete(version);
  EXPECT_TRUE(woken);
  const FillingVersion::View view = filling.Look();
  ASSERT_EQ(view.complete, version);
  EXPECT_NE(view.complete->version, 0u);
  EXPECT_EQ(0, std::memcmp(view.complete->buffer->data(), bytes.data(), kBytes));
  // A later failure (a shutdown racing the end) changes nothing.
  filling.Fail(absl::UnavailableError("late"));
  EXPECT_FALSE(filling.Look().failed.has_value());
  FillingVersion::Wake after = [] {};
  EXPECT_FALSE(filling.WaitPast(filling.Look().changes, after));
}

// A holder that fails mid-copy: readers stop reading its bytes at once,
// and the copy that Completes says whether what it had written (and a
// reader may have sent) matches the bytes that checked out.
TEST_F(FillingVersionTest, AnAbandonedAttemptIsCheckedAgainstTheCompletedCopy) {
  for (const bool same : {true, false}) {
    SCOPED_TRACE(same ? "same bytes" : "other bytes");
    FillingVersion filling;
    const std::vector<uint8_t> bytes = Pattern(kBytes, 13);
    PendingVersion first = Prepared();
    ASSERT_TRUE(filling.Begin(Described("pulled", kBytes), *first.buffer).ok());
    const std::vector<uint8_t> sent = same ? bytes : Pattern(kBytes, 14);
    ASSERT_TRUE(first.buffer->Write(0, sent.data(), 1 << 20).ok());
    filling.Advance(1 << 20);
    ASSERT_TRUE(filling.Borrow(0, 4096).has_value());
    filling.Abandon();
    EXPECT_EQ(filling.Look().readable, 0u);
    EXPECT_FALSE(filling.Borrow(0, 4096).has_value());
    first = PendingVersion();  // the failed attempt's buffer goes

    PendingVersion second = Prepared();
    ASSERT_TRUE(filling.Begin(Described("pulled", kBytes), *second.buffer).ok());
    ASSERT_TRUE(second.buffer->Write(0, bytes.data(), kBytes).ok());
    filling.Advance(kBytes);
    absl::StatusOr<SealedVersion> sealed = registry_.Seal(std::move(second));
    ASSERT_TRUE(sealed.ok()) << sealed.status();
    std::shared_ptr<const TensorVersion> version = sealed->Share();
    ASSERT_TRUE(registry_.Install(*std::move(sealed)).ok());
    filling.Complete(version);
    const FillingVersion::View view = filling.Look();
    ASSERT_EQ(view.complete, version);
    EXPECT_EQ(view.abandoned_bytes_differed, !same);
  }
}

// A copy of at most kPassedOnAboveBytes is not mapped: its readers wait
// for the whole copy.
TEST_F(FillingVersionTest, ASmallCopyIsNotPassedOn) {
  constexpr uint64_t kSmall = FillingVersion::kPassedOnAboveBytes;
  FillingVersion filling;
  PendingVersion pending = Prepared(kSmall);
  ASSERT_TRUE(filling.Begin(Described("pulled", kSmall), *pending.buffer).ok());
  filling.Advance(kSmall);
  const FillingVersion::View view = filling.Look();
  EXPECT_NE(view.announced, nullptr);
  EXPECT_EQ(view.readable, 0u);
  EXPECT_FALSE(filling.Borrow(0, 1).has_value());
}

TEST_F(FillingVersionTest, AFailureReachesWaitingReaders) {
  FillingVersion filling;
  bool woken = false;
  FillingVersion::Wake wake = [&woken] { woken = true; };
  ASSERT_TRUE(filling.WaitPast(filling.Look().changes, wake));
  filling.Fail(absl::UnavailableError("no holder could serve it"));
  EXPECT_TRUE(woken);
  const FillingVersion::View view = filling.Look();
  ASSERT_TRUE(view.failed.has_value());
  EXPECT_EQ(view.failed->code(), absl::StatusCode::kUnavailable);
}

// A reader on another thread sees every byte it copies out equal to what
// was written before the watermark passed it (run under TSan in CI).
TEST_F(FillingVersionTest, AConcurrentReaderCopiesOnlyWrittenBytes) {
  FillingVersion filling;
  PendingVersion pending = Prepared();
  const std::vector<uint8_t> bytes = Pattern(kBytes, 9);
  ASSERT_TRUE(filling.Begin(Described("pulled", kBytes), *pending.buffer).ok());
  std::thread reader([&] {
    constexpr uint64_t kRead = 64 << 10;
    uint64_t next = 0;
    while (next < kBytes - 1) {
      const FillingVersion::View view = filling.Look();
      if (view.failed.has_value()) break;
      if (view.readable <= next) {
        std::this_thread::yield();
        continue;
      }
      const uint64_t size = std::min<uint64_t>(kRead, view.readable - next);
      std::optional<FillingVersion::Borrowed> borrowed = filling.Borrow(next, size);
      if (!borrowed.has_value()) continue;
      ASSERT_EQ(0, std::memcmp(borrowed->data, bytes.data() + next, size)) << "at " << next;
      next += size;
    }
  });
  constexpr uint64_t kPiece = 256 << 10;
  for (uint64_t at = 0; at < kBytes; at += kPiece) {
    ASSERT_TRUE(pending.buffer->Write(at, bytes.data() + at, kPiece).ok());
    filling.Advance(at + kPiece);
  }
  reader.join();
  filling.Fail(absl::CancelledError("test over"));
}

}  // namespace
}  // namespace tensord
