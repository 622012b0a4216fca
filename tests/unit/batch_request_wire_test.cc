// AppendAcquireManyField writes byte for byte what the generated serializer
// writes for a HandoffRequest holding only the same acquire_many, and
// appended to a serialized request it parses as that request with the
// field set. EncodeBatchFetchRequest writes what the generated serializer
// writes for the same BatchFetchRequest. AppendPutManyField writes what it
// writes for a HandoffRequest holding only the same put_many (items as
// LayoutToProto describes their layouts), and PutManyItemSize is each
// item's share of it. PutPutHeader writes what it writes for a PutHeader
// as the BatchPut client built it (the layout's strides cleared), and
// EncodeBatchPutHeaderRequest a BatchPutRequest holding only that header.
#include "client/src/batch_request_wire.h"

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "service/wire/batch_limits.h"
#include "service/wire/layout_conversion.h"
#include "tensord/v1/handoff.pb.h"
#include "tensord/v1/tensor_service.pb.h"
#include "tests/unit/grpc_buffer_bytes.h"

namespace tensord {
namespace {

v1::HandoffRequest Generated(const AcquireManyByName& request) {
  v1::HandoffRequest message;
  v1::AcquireManyRequest* acquire = message.mutable_acquire_many();
  for (const TensorRef& item : request.items) {
    v1::NameVersion* wanted = acquire->add_items();
    wanted->set_name(item.name);
    wanted->set_version(item.version);
  }
  acquire->set_host_only(request.host_only);
  acquire->set_accepts_arena_slots(request.accepts_arena_slots);
  acquire->mutable_mapped_arena_ids()->Add(request.mapped_arena_ids.begin(),
                                           request.mapped_arena_ids.end());
  return message;
}

void ExpectSameAsGenerated(const AcquireManyByName& request) {
  std::string by_hand;
  AppendAcquireManyField(request, by_hand);
  EXPECT_EQ(by_hand, Generated(request).SerializeAsString());
  size_t items_size = 0;
  for (const TensorRef& item : request.items) items_size += NameVersionItemSize(item);
  v1::AcquireManyRequest items_only;
  for (const TensorRef& item : request.items) {
    v1::NameVersion* wanted = items_only.add_items();
    wanted->set_name(item.name);
    wanted->set_version(item.version);
  }
  EXPECT_EQ(items_size, items_only.ByteSizeLong());
}

TEST(BatchRequestWireTest, AcquireManyIsWhatTheGeneratedSerializerWrites) {
  const std::string long_name(300, 'n');  // a two-byte length
  const std::vector<TensorRef> items = {{.name = "a"},
                                        {.name = "kv/layer0/block/17", .version = 42},
                                        {.name = long_name, .version = uint64_t{1} << 40},
                                        {.name = "", .version = 0}};
  const std::vector<uint64_t> arena_ids = {1, 300, uint64_t{1} << 63};
  ExpectSameAsGenerated({.items = items});
  ExpectSameAsGenerated({.items = items, .host_only = true});
  ExpectSameAsGenerated(
      {.items = items, .accepts_arena_slots = true, .mapped_arena_ids = arena_ids});
  ExpectSameAsGenerated({.items = items,
                         .host_only = true,
                         .accepts_arena_slots = true,
                         .mapped_arena_ids = arena_ids});
  ExpectSameAsGenerated({});
}

TEST(BatchRequestWireTest, AcquireManyAppendedToARequestItParsesAsThatRequestWithTheField) {
  const std::vector<TensorRef> items = {{.name = "x/1"}, {.name = "x/2", .version = 7}};
  const std::vector<uint64_t> arena_ids = {5};
  const AcquireManyByName request{.items = items,
                                  .host_only = false,
                                  .accepts_arena_slots = true,
                                  .mapped_arena_ids = arena_ids};
  v1::HandoffRequest head;
  head.set_request_id(99);
  head.add_release_lease_ids(3);
  head.add_release_lease_ids(4);
  std::string packet = head.SerializeAsString();
  AppendAcquireManyField(request, packet);

  v1::HandoffRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(packet));
  v1::HandoffRequest expected = Generated(request);
  expected.set_request_id(99);
  expected.add_release_lease_ids(3);
  expected.add_release_lease_ids(4);
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(parsed.kind_case(), v1::HandoffRequest::kAcquireMany);
}

v1::BatchFetchRequest GeneratedBatchFetch(const BatchSelection& selection) {
  v1::BatchFetchRequest message;
  for (const TensorRef& item : selection.items) {
    v1::NameVersion* wanted = message.add_items();
    wanted->set_name(item.name);
    wanted->set_version(item.version);
  }
  if (selection.prefix.has_value()) message.set_prefix(*selection.prefix);
  message.set_group_version(selection.group_version);
  message.set_cluster_group(selection.cluster_group);
  return message;
}

void ExpectBatchFetchSameAsGenerated(const BatchSelection& selection) {
  const std::string by_hand = BufferBytes(EncodeBatchFetchRequest(selection));
  const v1::BatchFetchRequest generated = GeneratedBatchFetch(selection);
  EXPECT_EQ(by_hand, generated.SerializeAsString());
  v1::BatchFetchRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(by_hand));
  EXPECT_EQ(parsed.has_prefix(), selection.prefix.has_value());
  EXPECT_EQ(parsed.items_size(), static_cast<int>(selection.items.size()));
}

// A selection built field by field (designated initializers that leave
// members out draw -Wmissing-field-initializers).
BatchSelection Selection(std::span<const TensorRef> items, std::optional<std::string> prefix,
                         uint64_t group_version, uint64_t cluster_group) {
  BatchSelection selection;
  selection.items = items;
  selection.prefix = std::move(prefix);
  selection.group_version = group_version;
  selection.cluster_group = cluster_group;
  return selection;
}

TEST(BatchRequestWireTest, BatchFetchRequestIsWhatTheGeneratedSerializerWrites) {
  const std::string long_name(300, 'n');  // a two-byte length
  const std::vector<TensorRef> items = {{.name = "a"},
                                        {.name = "kv/layer0/block/17", .version = 42},
                                        {.name = long_name, .version = uint64_t{1} << 40},
                                        {.name = "", .version = 0},
                                        {.name = "x", .version = ~uint64_t{0}}};
  ExpectBatchFetchSameAsGenerated(Selection(items, std::nullopt, 0, 0));
  ExpectBatchFetchSameAsGenerated(Selection(std::span(items).first(1), std::nullopt, 0, 0));
  // A prefix is written when set, even empty (proto3 optional).
  ExpectBatchFetchSameAsGenerated(Selection({}, "kv/layer0/", 0, 0));
  ExpectBatchFetchSameAsGenerated(Selection({}, "", 0, 0));
  ExpectBatchFetchSameAsGenerated(Selection({}, long_name, 0, 0));
  ExpectBatchFetchSameAsGenerated(Selection({}, std::nullopt, 7, 0));
  ExpectBatchFetchSameAsGenerated(Selection({}, std::nullopt, uint64_t{1} << 63, 0));
  ExpectBatchFetchSameAsGenerated(Selection({}, std::nullopt, 0, 300));
  // Not a valid selection (Client sends one of them), but framed alike.
  ExpectBatchFetchSameAsGenerated(Selection(items, "p", 2, 3));
  ExpectBatchFetchSameAsGenerated(Selection({}, std::nullopt, 0, 0));
}

TEST(BatchRequestWireTest, ABatchOfTheMostItemsIsWhatTheGeneratedSerializerWrites) {
  std::vector<std::string> names;
  std::vector<TensorRef> items;
  names.reserve(kMaxBatchItems);
  for (size_t i = 0; i < kMaxBatchItems; ++i) {
    names.push_back("bench/batch/fetch/4096/" + std::to_string(i));
  }
  for (size_t i = 0; i < kMaxBatchItems; ++i) items.push_back({.name = names[i], .version = i % 3});
  ExpectBatchFetchSameAsGenerated(Selection(items, std::nullopt, 0, 0));
}

v1::HandoffRequest GeneratedPutMany(std::span<const PutManyItemWire> items, bool atomic) {
  v1::HandoffRequest message;
  v1::PutManyRequest* put = message.mutable_put_many();
  for (const PutManyItemWire& item : items) {
    v1::PutManyItem* added = put->add_items();
    added->set_name(std::string(item.name));
    LayoutToProto(*item.layout, added->mutable_layout());
    // LayoutToProto spells compact strides out; a layout without strides
    // has none on the wire.
    if (item.layout->strides.empty()) added->mutable_layout()->clear_strides();
    added->set_total_bytes(item.total_bytes);
    added->set_retention(static_cast<v1::Retention>(item.retention));
    if (item.crc32c.has_value()) added->set_crc32c(*item.crc32c);
    added->set_offset(item.offset);
  }
  put->set_atomic(atomic);
  return message;
}

void ExpectPutManySameAsGenerated(std::span<const PutManyItemWire> items, bool atomic) {
  std::string by_hand;
  AppendPutManyField(items, atomic, by_hand);
  const v1::HandoffRequest generated = GeneratedPutMany(items, atomic);
  EXPECT_EQ(by_hand, generated.SerializeAsString());
  size_t items_size = 0;
  for (const PutManyItemWire& item : items) items_size += PutManyItemSize(item);
  v1::PutManyRequest items_only = generated.put_many();
  items_only.set_atomic(false);
  EXPECT_EQ(items_size, items_only.ByteSizeLong());
}

PutManyItemWire PutItem(absl::string_view name, const dlpack::TensorLayout& layout,
                        uint64_t total_bytes, int32_t retention, std::optional<uint32_t> crc32c,
                        uint64_t offset) {
  PutManyItemWire item;
  item.name = name;
  item.layout = &layout;
  item.total_bytes = total_bytes;
  item.retention = retention;
  item.crc32c = crc32c;
  item.offset = offset;
  return item;
}

// The layouts the put serializer tests write.
struct SampleLayouts {
  SampleLayouts() {
    bytes.dtype = {kDLUInt, 8, 1};
    bytes.shape = {4096};
    odd.dtype = {kDLBfloat, 16, 4};
    odd.shape = {3, -1, int64_t{1} << 40, 0};
    odd.strides = {-5, 1, int64_t{1} << 62, 7};
    odd.byte_offset = uint64_t{1} << 33;
    odd.device = {kDLCUDA, -2};
  }
  dlpack::TensorLayout bytes;   // 4 KiB of uint8, as a batch put of small tensors has
  dlpack::TensorLayout scalar;  // no shape, a zero dtype, the default device
  dlpack::TensorLayout odd;     // negative and large values, strides, offset, another device
};

TEST(BatchRequestWireTest, PutManyIsWhatTheGeneratedSerializerWrites) {
  const std::string long_name(300, 'n');  // a two-byte length
  const SampleLayouts layouts;
  const dlpack::TensorLayout& bytes = layouts.bytes;
  const dlpack::TensorLayout& scalar = layouts.scalar;
  const dlpack::TensorLayout& odd = layouts.odd;
  const std::vector<PutManyItemWire> items = {
      PutItem("kv/layer0/block/17", bytes, 4096, 0, std::nullopt, 0),
      PutItem("a", scalar, 0, 2, 0, 64),  // a checksum of 0 is still written
      PutItem(long_name, odd, ~uint64_t{0}, 1, ~uint32_t{0}, ~uint64_t{0}),
      PutItem("", scalar, 1, -3, 12345, uint64_t{1} << 26),
  };
  ExpectPutManySameAsGenerated(items, /*atomic=*/false);
  ExpectPutManySameAsGenerated(items, /*atomic=*/true);
  ExpectPutManySameAsGenerated(std::span(items).first(1), /*atomic=*/false);
  ExpectPutManySameAsGenerated({}, /*atomic=*/false);
  ExpectPutManySameAsGenerated({}, /*atomic=*/true);

  std::vector<std::string> names;
  std::vector<PutManyItemWire> many;
  for (size_t i = 0; i < kMaxPutManyItems; ++i)
    names.push_back("bench/batch/put/" + std::to_string(i));
  for (size_t i = 0; i < kMaxPutManyItems; ++i) {
    many.push_back(
        PutItem(names[i], bytes, 4096, 0, static_cast<uint32_t>(i * 2654435761u), i * 4096));
  }
  ExpectPutManySameAsGenerated(many, /*atomic=*/true);
}

TEST(BatchRequestWireTest, PutManyAppendedToARequestItParsesAsThatRequestWithTheField) {
  dlpack::TensorLayout layout;
  layout.dtype = {kDLFloat, 32, 1};
  layout.shape = {2, 3};
  const std::vector<PutManyItemWire> items = {PutItem("x/1", layout, 24, 0, 7, 0),
                                              PutItem("x/2", layout, 24, 2, std::nullopt, 64)};
  v1::HandoffRequest head;
  head.set_request_id(99);
  head.add_release_lease_ids(3);
  std::string packet = head.SerializeAsString();
  AppendPutManyField(items, /*atomic=*/true, packet);

  v1::HandoffRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(packet));
  v1::HandoffRequest expected = GeneratedPutMany(items, /*atomic=*/true);
  expected.set_request_id(99);
  expected.add_release_lease_ids(3);
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(parsed.kind_case(), v1::HandoffRequest::kPutMany);
}

// What the BatchPut client wrote with protobuf: the layout as LayoutToProto
// describes it, strides cleared (the bytes sent are compact).
v1::PutHeader GeneratedPutHeader(const PutHeaderWire& header) {
  v1::PutHeader message;
  message.set_name(std::string(header.name));
  LayoutToProto(*header.layout, message.mutable_layout());
  message.mutable_layout()->clear_strides();
  message.set_total_bytes(header.total_bytes);
  if (header.crc32c.has_value()) message.set_crc32c(*header.crc32c);
  message.set_retention(static_cast<v1::Retention>(header.retention));
  return message;
}

PutHeaderWire Header(absl::string_view name, const dlpack::TensorLayout& layout,
                     uint64_t total_bytes, std::optional<uint32_t> crc32c, int32_t retention) {
  PutHeaderWire header;
  header.name = name;
  header.layout = &layout;
  header.total_bytes = total_bytes;
  header.crc32c = crc32c;
  header.retention = retention;
  return header;
}

TEST(BatchRequestWireTest, PutHeaderIsWhatTheGeneratedSerializerWrites) {
  const std::string long_name(300, 'n');  // a two-byte length
  const SampleLayouts layouts;            // the odd one's strides are left out
  const dlpack::TensorLayout& bytes = layouts.bytes;
  const dlpack::TensorLayout& scalar = layouts.scalar;
  const dlpack::TensorLayout& odd = layouts.odd;
  for (const PutHeaderWire& header : {
           Header("kv/layer0/block/17", bytes, 4096, std::nullopt, 0),
           Header("a", scalar, 0, 0, 2),  // a checksum of 0 is still written
           Header(long_name, odd, ~uint64_t{0}, ~uint32_t{0}, 1),
           Header("", scalar, 1, 12345, -3),
       }) {
    const std::string expected = GeneratedPutHeader(header).SerializeAsString();
    const size_t size = PutHeaderSize(header);
    ASSERT_EQ(size, expected.size()) << header.name;
    std::string written(size + 1, '\xee');  // one byte past: not written
    uint8_t* const start = reinterpret_cast<uint8_t*>(written.data());
    EXPECT_EQ(PutPutHeader(header, size, start), start + size) << header.name;
    EXPECT_EQ(written.substr(0, size), expected) << header.name;
    EXPECT_EQ(written.back(), '\xee');

    v1::BatchPutRequest request;
    *request.mutable_header() = GeneratedPutHeader(header);
    EXPECT_EQ(BufferBytes(EncodeBatchPutHeaderRequest(header)), request.SerializeAsString())
        << header.name;
  }
}

}  // namespace
}  // namespace tensord
