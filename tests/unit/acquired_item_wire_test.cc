// The batch acquire answer's hand-framed items (AcquiredItemWire, on the
// server) and their hand parser (ParseWireBatchAnswer and
// ParseWireAcquiredItem, on the client), each held to the generated code.
#include "service/transport/acquired_item_wire.h"

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "client/src/info_conversion.h"
#include "gtest/gtest.h"
#include "service/transport/tensor_service.h"
#include "service/wire/handoff_batch_answer.h"
#include "service/wire/status_conversion.h"
#include "service/wire/wire_tensor_info.h"
#include "tensord/v1/handoff.pb.h"

#include "tests/unit/stored_versions.h"

namespace tensord {
namespace {

TensorVersion& AddVersion(std::deque<TensorVersion>& versions, std::string name,
                          uint64_t total_bytes) {
  return AddStoredVersion(versions, std::move(name), total_bytes, DLDataType{kDLFloat, 32, 1});
}

std::span<const uint8_t> Bytes(const std::string& bytes) {
  return {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
}

// A handoff answer as the session writes it: the generated serializer's
// request id, then the hand-framed acquire_many field.
std::string Answer(uint64_t request_id, const std::string& items, bool more) {
  v1::HandoffResponse head;
  head.set_request_id(request_id);
  std::string payload = items;
  if (more) payload.append(kMoreItemsFollowField, 2);
  std::string answer = head.SerializeAsString();
  AppendAcquireManyField(payload, answer);
  return answer;
}

class AcquiredItemWireTest : public ::testing::Test {
 protected:
  AcquiredItemWireTest() {
    AddVersion(versions_, "kv/0", 4096);
    AddVersion(versions_, std::string(200, 'n'), 70000);  // two-byte lengths
    TensorVersion& device = AddVersion(versions_, "gpu/w", 1 << 20);
    device.layout.device = DLDevice{kDLCUDA, 1};
    handle_.set_backend("simulated");
    handle_.set_kind(v1::DEVICE_HANDLE_KIND_POSIX_FD);
    handle_.set_device(1);
    handle_.set_size(1 << 20);
    handle_.set_allocation_size(2 << 20);
    handle_.set_fd_attached(true);
    handle_.set_server_instance(0xfedcba9876543210u);

    // An arena slot at index 0 (proto3 leaves the zeros out), a memfd of
    // its own, a device export, and two refusals, one for the gRPC path.
    fields_.push_back({.index = 0,
                       .version = &versions_[0],
                       .lease_id = 1,
                       .mapping_bytes = 16 << 20,
                       .mapping_offset = 8192,
                       .arena_id = 3,
                       .fd_attached = true});
    fields_.push_back(
        {.index = 1, .version = &versions_[1], .lease_id = 300, .mapping_bytes = 73728});
    fields_.push_back({.index = 2,
                       .version = &versions_[2],
                       .lease_id = 301,
                       .device_handle = &handle_,
                       .fd_attached = true});
    fields_.push_back({.index = 3, .refusal = absl::NotFoundError("tensor 'kv/9' not found")});
    fields_.push_back(
        {.index = 4, .refusal = MarkUseRemote(absl::FailedPreconditionError("on the device"))});

    for (const AcquiredItemFields& fields : fields_) {
      v1::AcquiredItem* item = expected_.add_items();
      item->set_index(fields.index);
      if (fields.version == nullptr) {
        item->mutable_status()->set_code(static_cast<int32_t>(fields.refusal.code()));
        item->mutable_status()->set_message(std::string(fields.refusal.message()));
        item->set_use_remote(IsUseRemote(fields.refusal));
      } else {
        v1::AcquireResponse* acquire = item->mutable_acquire();
        InfoToProto(*fields.version, acquire->mutable_info());
        acquire->set_lease_id(fields.lease_id);
        acquire->set_mapping_bytes(fields.mapping_bytes);
        acquire->set_mapping_offset(fields.mapping_offset);
        acquire->set_arena_id(fields.arena_id);
        if (fields.device_handle != nullptr) *acquire->mutable_device_handle() = handle_;
      }
      item->set_fd_attached(fields.fd_attached);
    }
  }

  std::string WrittenItems() const {
    std::string items;
    for (const AcquiredItemFields& fields : fields_) {
      const AcquiredItemWire wire(fields);
      const size_t at = items.size();
      items.resize(at + wire.field_size());
      uint8_t* end = wire.WriteField(reinterpret_cast<uint8_t*>(items.data()) + at);
      EXPECT_EQ(end, reinterpret_cast<uint8_t*>(items.data()) + items.size());
    }
    return items;
  }

  std::deque<TensorVersion> versions_;
  v1::DeviceHandle handle_;
  std::vector<AcquiredItemFields> fields_;
  v1::AcquireManyResponse expected_;
};

TEST_F(AcquiredItemWireTest, WritesWhatTheGeneratedSerializerWrites) {
  EXPECT_EQ(absl::BytesToHexString(WrittenItems()),
            absl::BytesToHexString(expected_.SerializeAsString()));

  v1::HandoffResponse generated;
  generated.set_request_id(77);
  *generated.mutable_acquire_many() = expected_;
  generated.mutable_acquire_many()->set_more(true);
  EXPECT_EQ(absl::BytesToHexString(Answer(77, WrittenItems(), /*more=*/true)),
            absl::BytesToHexString(generated.SerializeAsString()));
  generated.mutable_acquire_many()->Clear();
  EXPECT_EQ(Answer(77, "", /*more=*/false), generated.SerializeAsString());
}

TEST_F(AcquiredItemWireTest, TheClientParsesWhatTheGeneratedParserParses) {
  const std::string answer = Answer(5, WrittenItems(), /*more=*/true);
  WireBatchAnswer parsed;
  ASSERT_TRUE(ParseWireBatchAnswer(Bytes(answer), parsed));
  EXPECT_EQ(parsed.request_id, 5u);
  EXPECT_EQ(parsed.code, 0);
  EXPECT_TRUE(parsed.more);
  ASSERT_EQ(parsed.items.size(), fields_.size());

  WireAcquiredItem item;  // reused, as the client does
  for (size_t i = 0; i < parsed.items.size(); ++i) {
    SCOPED_TRACE(i);
    const v1::AcquiredItem& want = expected_.items(static_cast<int>(i));
    ASSERT_TRUE(ParseWireAcquiredItem(parsed.items[i], kAcquiredItemNesting, item));
    EXPECT_EQ(item.index, want.index());
    EXPECT_EQ(item.has_status, want.has_status());
    EXPECT_EQ(item.status_code, want.status().code());
    EXPECT_EQ(item.status_message, want.status().message());
    EXPECT_EQ(item.use_remote, want.use_remote());
    EXPECT_EQ(item.has_acquire, want.has_acquire());
    EXPECT_EQ(item.info, WireInfoOf(want.acquire().info()));
    EXPECT_EQ(item.lease_id, want.acquire().lease_id());
    EXPECT_EQ(item.mapping_bytes, want.acquire().mapping_bytes());
    EXPECT_EQ(item.mapping_offset, want.acquire().mapping_offset());
    EXPECT_EQ(item.arena_id, want.acquire().arena_id());
    EXPECT_EQ(item.has_device_handle, want.acquire().has_device_handle());
    EXPECT_EQ(item.device_handle.SerializeAsString(),
              want.acquire().device_handle().SerializeAsString());
    EXPECT_EQ(item.fd_attached, want.fd_attached());
  }
}

TEST(HandoffBatchAnswerTest, ARefusalParsesWithItsCodeAndNoItems) {
  v1::HandoffResponse refusal;
  refusal.set_request_id(9);
  refusal.set_code(static_cast<int32_t>(absl::StatusCode::kResourceExhausted));
  refusal.set_message("batch acquire of 10 versions on a connection holding 65530 leases");
  refusal.set_use_remote(true);
  WireBatchAnswer parsed;
  ASSERT_TRUE(ParseWireBatchAnswer(Bytes(refusal.SerializeAsString()), parsed));
  EXPECT_EQ(parsed.request_id, 9u);
  EXPECT_EQ(parsed.code, refusal.code());
  EXPECT_EQ(parsed.message, refusal.message());
  EXPECT_TRUE(parsed.use_remote);
  EXPECT_TRUE(parsed.items.empty());
  EXPECT_FALSE(parsed.more);
}

TEST(HandoffBatchAnswerTest, RefusesMalformedPacketsAndOtherAnswers) {
  WireBatchAnswer parsed;
  // acquire_many's length runs past the packet.
  EXPECT_FALSE(ParseWireBatchAnswer(Bytes(std::string("\x08\x01\x42\x09\x0a\x00", 6)), parsed));
  // A message field that is not UTF-8.
  EXPECT_FALSE(ParseWireBatchAnswer(Bytes(std::string("\x1a\x02\xc3\x28", 4)), parsed));
  // An answer of another kind (acquire): never sent for a batch request.
  v1::HandoffResponse other;
  other.set_request_id(3);
  other.mutable_acquire()->set_lease_id(4);
  EXPECT_FALSE(ParseWireBatchAnswer(Bytes(other.SerializeAsString()), parsed));
  // An item cut short fails its own parse.
  WireAcquiredItem item;
  EXPECT_FALSE(
      ParseWireAcquiredItem(Bytes(std::string("\x22\x05\x10\x01", 4)), kAcquiredItemNesting, item));
}

}  // namespace
}  // namespace tensord
