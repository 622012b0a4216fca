// AppendAcquireManyField writes byte for byte what the generated serializer
// writes for a HandoffRequest holding only the same acquire_many, and
// appended to a serialized request it parses as that request with the
// field set.
#include "client/src/acquire_many_wire.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tensord/v1/handoff.pb.h"

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
  for (const TensorRef& item : request.items) items_size += AcquireManyItemSize(item);
  v1::AcquireManyRequest items_only;
  for (const TensorRef& item : request.items) {
    v1::NameVersion* wanted = items_only.add_items();
    wanted->set_name(item.name);
    wanted->set_version(item.version);
  }
  EXPECT_EQ(items_size, items_only.ByteSizeLong());
}

TEST(AcquireManyWireTest, WritesWhatTheGeneratedSerializerWrites) {
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

TEST(AcquireManyWireTest, AppendedToARequestItParsesAsThatRequestWithTheField) {
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

}  // namespace
}  // namespace tensord
