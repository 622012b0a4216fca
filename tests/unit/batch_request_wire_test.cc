// AppendAcquireManyField writes byte for byte what the generated serializer
// writes for a HandoffRequest holding only the same acquire_many, and
// appended to a serialized request it parses as that request with the
// field set. EncodeBatchFetchRequest writes what the generated serializer
// writes for the same BatchFetchRequest.
#include "client/src/batch_request_wire.h"

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
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

}  // namespace
}  // namespace tensord
