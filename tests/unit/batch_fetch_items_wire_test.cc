#include "service/transport/batch_fetch_items_wire.h"

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/transport/tensor_service.h"
#include "tensord/v1/tensor_service.pb.h"
#include "tests/unit/grpc_buffer_bytes.h"

#include "tests/unit/stored_versions.h"

namespace tensord {
namespace {

TensorVersion& AddVersion(std::deque<TensorVersion>& versions, std::string name,
                          uint64_t total_bytes) {
  return AddStoredVersion(versions, std::move(name), total_bytes, DLDataType{kDLUInt, 8, 1});
}

// The bytes an item's copy writes: its index, repeated.
absl::Status FillWith(uint8_t value, uint64_t size, uint8_t* out) {
  std::memset(out, value, size);
  return absl::OkStatus();
}

TEST(BatchFetchItemsWireTest, WritesWhatTheGeneratedSerializerWrites) {
  std::deque<TensorVersion> versions;
  AddVersion(versions, "kv/0", 4096);
  AddVersion(versions, "kv/empty", 0);
  AddVersion(versions, "kv/large", 1 << 20);
  AddVersion(versions, std::string(200, 'n'), 70000);  // two-byte lengths everywhere

  BatchFetchItemsWire wire(1 << 20);
  v1::BatchFetchResponse expected;
  // Index 0 (proto3 leaves it out), an empty item, a failure with a long
  // message cut inside a UTF-8 character, a large item's info alone.
  const std::vector<uint32_t> indexes = {0, 1, 2, 3, 200};
  for (size_t i = 0; i < versions.size(); ++i) {
    const TensorVersion& version = versions[i];
    const bool with_bytes = version.total_bytes != (1 << 20);
    const uint8_t fill = static_cast<uint8_t>(indexes[i] + 1);
    absl::StatusOr<bool> added =
        wire.AddVersion(indexes[i], version, with_bytes,
                        [&](uint8_t* out) { return FillWith(fill, version.total_bytes, out); });
    ASSERT_TRUE(added.ok() && *added) << added.status();
    v1::BatchFetchItem* item = expected.mutable_items()->add_items();
    item->set_index(indexes[i]);
    InfoToProto(version, item->mutable_info());
    if (with_bytes) item->set_inline_data(std::string(version.total_bytes, char(fill)));
  }
  // 299 ASCII bytes then a 3-byte character straddling the 300-byte cut.
  const std::string long_message = std::string(299, 'm') + "\xe2\x82\xac" + "tail";
  ASSERT_TRUE(wire.AddFailure(200, absl::NotFoundError(long_message)));
  ASSERT_TRUE(wire.AddFailure(0, absl::InternalError("")));
  v1::BatchFetchItem* failed = expected.mutable_items()->add_items();
  failed->set_index(200);
  failed->mutable_status()->set_code(static_cast<int32_t>(absl::StatusCode::kNotFound));
  failed->mutable_status()->set_message(std::string(299, 'm'));
  v1::BatchFetchItem* empty_message = expected.mutable_items()->add_items();
  empty_message->mutable_status()->set_code(static_cast<int32_t>(absl::StatusCode::kInternal));
  EXPECT_EQ(wire.items(), 6u);

  const std::string written = BufferBytes(wire.Finish());
  EXPECT_EQ(absl::BytesToHexString(written), absl::BytesToHexString(expected.SerializeAsString()));
  v1::BatchFetchResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(written));
  EXPECT_EQ(parsed.items().items_size(), 6);
}

// Items referenced where their bytes lie make the same message as items
// copied into it, first, last or side by side, between copied items and
// failures; the referenced bytes are released once gRPC lets the message
// go, not before.
TEST(BatchFetchItemsWireTest, ReferencedItemsWriteTheSameBytesAsCopiedOnes) {
  std::deque<TensorVersion> versions;
  std::vector<std::vector<uint8_t>> bytes;
  const std::vector<uint64_t> sizes = {20000, 100, 16384, 16384, 0, 70000, 30000};
  for (size_t i = 0; i < sizes.size(); ++i) {
    AddVersion(versions, "kv/" + std::to_string(i), sizes[i]);
    bytes.emplace_back(sizes[i], static_cast<uint8_t>(i + 1));
  }
  // Referenced: the first, the third and fourth (side by side) and the
  // last; the others copied, and a failure in the middle.
  const std::vector<bool> referenced = {true, false, true, true, false, false, true};
  BatchFetchItemsWire copied(1 << 20);
  BatchFetchItemsWire mixed(1 << 20);
  int released = 0;
  for (size_t i = 0; i < versions.size(); ++i) {
    const auto copy = [&, i](uint8_t* out) {
      std::memcpy(out, bytes[i].data(), bytes[i].size());
      return absl::OkStatus();
    };
    absl::StatusOr<bool> added = copied.AddVersion(i, versions[i], true, copy);
    ASSERT_TRUE(added.ok() && *added);
    if (referenced[i]) {
      ASSERT_TRUE(mixed.AddVersionReferencing(i, versions[i], [&, i] {
        return grpc::Slice(
            bytes[i].data(), bytes[i].size(), [](void* count) { ++*static_cast<int*>(count); },
            &released);
      }));
    } else {
      added = mixed.AddVersion(i, versions[i], true, copy);
      ASSERT_TRUE(added.ok() && *added);
    }
    if (i == 4) {
      ASSERT_TRUE(copied.AddFailure(9, absl::NotFoundError("gone")));
      ASSERT_TRUE(mixed.AddFailure(9, absl::NotFoundError("gone")));
    }
  }
  const std::string expected = BufferBytes(copied.Finish());
  {
    const grpc::ByteBuffer message = mixed.Finish();
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(message.Dump(&slices).ok());
    EXPECT_GE(slices.size(), 8u) << "the referenced bytes are slices of their own";
    EXPECT_EQ(BufferBytes(message), expected);
    slices.clear();
    EXPECT_EQ(released, 0) << "released while the message still holds them";
  }
  EXPECT_EQ(released, 4);
  v1::BatchFetchResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(expected));
  ASSERT_EQ(parsed.items().items_size(), 8);
  EXPECT_EQ(parsed.items().items(6).inline_data(), std::string(70000, char(6)));
}

// A referenced item counts against the budget like a copied one, and one
// that does not fit is not referenced at all.
TEST(BatchFetchItemsWireTest, AReferencedItemThatDoesNotFitIsNotTaken) {
  std::deque<TensorVersion> versions;
  TensorVersion& first = AddVersion(versions, "first", 40000);
  TensorVersion& second = AddVersion(versions, "second", 40000);
  std::vector<uint8_t> bytes(40000, 7);
  int references = 0;
  const auto reference = [&] {
    ++references;
    return grpc::Slice(bytes.data(), bytes.size(), grpc::Slice::STATIC_SLICE);
  };
  BatchFetchItemsWire wire(64 * 1024);
  EXPECT_TRUE(wire.AddVersionReferencing(0, first, reference));
  EXPECT_FALSE(wire.AddVersionReferencing(1, second, reference));
  EXPECT_EQ(references, 1);
  EXPECT_EQ(wire.items(), 1u);
  // The first item always fits, however large, referenced too.
  BatchFetchItemsWire small(1024);
  EXPECT_TRUE(small.AddVersionReferencing(0, first, reference));
  v1::BatchFetchResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(BufferBytes(small.Finish())));
  ASSERT_EQ(parsed.items().items_size(), 1);
  EXPECT_EQ(parsed.items().items(0).inline_data().size(), 40000u);
}

TEST(BatchFetchItemsWireTest, StopsAtTheBudgetButAlwaysTakesTheFirstItem) {
  std::deque<TensorVersion> versions;
  TensorVersion& big = AddVersion(versions, "big", 64 * 1024);
  TensorVersion& small = AddVersion(versions, "small", 100);
  auto zeros = [](uint64_t size) {
    return [size](uint8_t* out) { return FillWith(0, size, out); };
  };
  BatchFetchItemsWire wire(1024);  // smaller than the first item
  absl::StatusOr<bool> first = wire.AddVersion(0, big, true, zeros(big.total_bytes));
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  absl::StatusOr<bool> second = wire.AddVersion(1, small, true, zeros(small.total_bytes));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second) << "a full message takes no more items";
  EXPECT_FALSE(wire.AddFailure(2, absl::NotFoundError("gone")));
  EXPECT_EQ(wire.items(), 1u);
  v1::BatchFetchResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(BufferBytes(wire.Finish())));
  ASSERT_EQ(parsed.items().items_size(), 1);
  EXPECT_EQ(parsed.items().items(0).inline_data().size(), big.total_bytes);

  BatchFetchItemsWire roomy(4096);
  for (uint32_t i = 0; i < 3; ++i) {
    absl::StatusOr<bool> added = roomy.AddVersion(i, small, true, zeros(small.total_bytes));
    ASSERT_TRUE(added.ok() && *added);
  }
  EXPECT_EQ(roomy.items(), 3u);
}

TEST(BatchFetchItemsWireTest, AFailedCopyFailsTheItem) {
  std::deque<TensorVersion> versions;
  TensorVersion& version = AddVersion(versions, "device", 64);
  BatchFetchItemsWire wire(4096);
  absl::StatusOr<bool> added = wire.AddVersion(
      0, version, true, [](uint8_t*) { return absl::InternalError("device copy failed"); });
  EXPECT_EQ(added.status().code(), absl::StatusCode::kInternal);
}

TEST(BatchFetchItemsWireTest, AnEmptyMessageIsAnEmptyItemsField) {
  BatchFetchItemsWire wire(4096);
  v1::BatchFetchResponse expected;
  expected.mutable_items();
  EXPECT_EQ(BufferBytes(wire.Finish()), expected.SerializeAsString());
}

}  // namespace
}  // namespace tensord
