// libFuzzer target: the hand-written parsers of the small calls' messages
// (service/wire/wire_tensor_info, wire_requests), held to the generated
// protobuf parser on every input: both accept or both refuse, an accepted
// message has the same fields, and the client's conversion (InfoFromWire)
// agrees with InfoFromProto, value for value or error for error.
//
// Input: [kind = byte % 12: TensorInfo, StatResponse, FetchHeader, StatRequest,
//         FetchRequest, FetchResponse, BatchFetchItem, BatchPutItem,
//         AcquiredItem, HandoffResponse (a batch acquire's answer),
//         BatchFetchRequest, HandoffRequest (a put_many: the hand parser
//         may leave a packet to protobuf, never take one protobuf refuses
//         or reads otherwise)]
//        [message bytes...]
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "client/src/info_conversion.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/unknown_field_set.h"
#include "service/transport/request_validation.h"
#include "service/wire/batch_put_items.h"
#include "service/wire/handoff_batch_answer.h"
#include "service/wire/wire_requests.h"
#include "service/wire/wire_tensor_info.h"
#include "tensord/v1/handoff.pb.h"
#include "tensord/v1/tensor_service.pb.h"
#include "tests/fuzz/same_put_header.h"

namespace {

using namespace tensord;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool SameInfo(const TensorInfo& a, const TensorInfo& b) {
  return a.name == b.name && a.version == b.version && a.dtype.code == b.dtype.code &&
         a.dtype.bits == b.dtype.bits && a.dtype.lanes == b.dtype.lanes && a.shape == b.shape &&
         a.strides == b.strides && a.byte_offset == b.byte_offset &&
         a.device.device_type == b.device.device_type && a.device.device_id == b.device.device_id &&
         a.total_bytes == b.total_bytes && a.crc32c == b.crc32c && a.created == b.created &&
         a.open_leases == b.open_leases && a.retention == b.retention && a.node == b.node;
}

// The parsed fields against the generated message's, then both conversions.
void CheckInfo(const WireTensorInfo& parsed, const v1::TensorInfo& proto) {
  const WireTensorInfo expected = WireInfoOf(proto);
  Check(parsed == expected);  // every field of the table (WireTensorInfo::operator==)
  absl::StatusOr<TensorInfo> from_wire = InfoFromWire(parsed);
  absl::StatusOr<TensorInfo> from_proto = InfoFromProto(proto);
  Check(from_wire.status() == from_proto.status());
  if (from_wire.ok()) Check(SameInfo(*from_wire, *from_proto));
}

void CheckHeader(const WireFetchHeader& parsed, const v1::FetchHeader& proto) {
  CheckInfo(parsed.info, proto.info());
  Check(parsed.range_offset == proto.range().offset() &&
        parsed.range_length == proto.range().length() && parsed.split == proto.split() &&
        parsed.has_inline_data == proto.has_inline_data() &&
        std::string(parsed.inline_data.begin(), parsed.inline_data.end()) == proto.inline_data());
}

// Field by field: the generated message also keeps unknown fields, which
// the client has no use for.
bool SameDeviceHandle(const v1::DeviceHandle& a, const v1::DeviceHandle& b) {
  return a.backend() == b.backend() && a.kind() == b.kind() && a.device() == b.device() &&
         a.legacy_ipc_handle() == b.legacy_ipc_handle() && a.offset() == b.offset() &&
         a.size() == b.size() && a.allocation_size() == b.allocation_size() &&
         a.fd_attached() == b.fd_attached() && a.server_instance() == b.server_instance();
}

void CheckAcquiredItem(const WireAcquiredItem& parsed, const v1::AcquiredItem& proto) {
  const v1::AcquireResponse& acquire = proto.acquire();
  Check(parsed.index == proto.index() && parsed.has_status == proto.has_status() &&
        parsed.status_code == proto.status().code() &&
        parsed.status_message == proto.status().message() &&
        parsed.use_remote == proto.use_remote() && parsed.has_acquire == proto.has_acquire() &&
        parsed.has_info == acquire.has_info() && parsed.lease_id == acquire.lease_id() &&
        parsed.mapping_bytes == acquire.mapping_bytes() &&
        parsed.mapping_offset == acquire.mapping_offset() &&
        parsed.arena_id == acquire.arena_id() &&
        parsed.has_device_handle == acquire.has_device_handle() &&
        SameDeviceHandle(parsed.device_handle, acquire.device_handle()) &&
        parsed.fd_attached == proto.fd_attached());
  CheckInfo(parsed.info, acquire.info());
}

// The whole answer, its items parsed too; false where the client refuses it.
bool ParseBatchAnswer(std::span<const uint8_t> wire, WireBatchAnswer& parsed,
                      std::vector<WireAcquiredItem>& items) {
  if (!ParseWireBatchAnswer(wire, parsed)) return false;
  items.resize(parsed.items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (!ParseWireAcquiredItem(parsed.items[i], kAcquiredItemNesting, items[i])) return false;
  }
  return true;
}

void CheckBatchAnswer(std::span<const uint8_t> wire) {
  v1::HandoffResponse proto;
  const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
  WireBatchAnswer parsed;
  std::vector<WireAcquiredItem> items;
  // The client refuses an answer of another kind in the oneof, which
  // protobuf keeps while a later field replaces it: it may refuse what
  // protobuf accepts, never accept what it refuses, and it must accept
  // every batch answer protobuf writes.
  const bool parsed_ok = ParseBatchAnswer(wire, parsed, items);
  if (!proto_ok) {
    Check(!parsed_ok);
    return;
  }
  const bool batch_kind = proto.kind_case() == v1::HandoffResponse::kAcquireMany ||
                          proto.kind_case() == v1::HandoffResponse::KIND_NOT_SET;
  if (batch_kind) {
    const std::string canonical = proto.SerializeAsString();
    WireBatchAnswer reparsed;
    std::vector<WireAcquiredItem> reparsed_items;
    Check(ParseBatchAnswer({reinterpret_cast<const uint8_t*>(canonical.data()), canonical.size()},
                           reparsed, reparsed_items));
  }
  if (!parsed_ok) {
    // Refused where protobuf accepts: only for another answer in the oneof.
    google::protobuf::UnknownFieldSet fields;
    Check(fields.ParseFromArray(wire.data(), static_cast<int>(wire.size())));
    bool other_answer = false;
    for (int i = 0; i < fields.field_count(); ++i) {
      const google::protobuf::UnknownField& field = fields.field(i);
      const int number = field.number();
      other_answer |= field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED &&
                      (number == 4 || number == 5 || number == 6 || number == 9 || number == 10);
    }
    Check(other_answer);
    return;
  }
  Check(batch_kind);
  const v1::AcquireManyResponse& answer = proto.acquire_many();
  Check(parsed.request_id == proto.request_id() && parsed.code == proto.code() &&
        parsed.message == proto.message() && parsed.use_remote == proto.use_remote() &&
        parsed.more == answer.more() && items.size() == static_cast<size_t>(answer.items_size()));
  for (size_t i = 0; i < items.size(); ++i) {
    CheckAcquiredItem(items[i], answer.items(static_cast<int>(i)));
  }
}

}  // namespace

// Protobuf logs every string field with invalid UTF-8 it rejects; at
// thousands of inputs a second that is only noise.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> wire(data + 1, size - 1);
  switch (data[0] % 12) {
    case 0: {
      v1::TensorInfo proto;
      WireTensorInfo parsed;
      const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
      Check(ParseWireTensorInfo(wire, parsed) == proto_ok);
      if (proto_ok) CheckInfo(parsed, proto);
      break;
    }
    case 1: {
      v1::StatResponse proto;
      WireTensorInfo parsed;
      const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
      Check(ParseWireStatResponse(wire, parsed) == proto_ok);
      if (proto_ok) CheckInfo(parsed, proto.info());
      break;
    }
    case 3: {
      v1::StatRequest proto;
      WireStatRequest parsed;
      const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
      Check(ParseWireStatRequest(wire, parsed) == proto_ok);
      if (proto_ok) Check(parsed.name == proto.name() && parsed.version == proto.version());
      break;
    }
    case 4: {
      v1::FetchRequest proto;
      WireFetchRequest parsed;
      const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
      Check(ParseWireFetchRequest(wire, parsed) == proto_ok);
      if (!proto_ok) break;
      Check(parsed.name == proto.name() && parsed.version == proto.version() &&
            parsed.has_range == proto.has_range() &&
            parsed.range_offset == proto.range().offset() &&
            parsed.range_length == proto.range().length() &&
            parsed.max_chunk_bytes == proto.max_chunk_bytes() &&
            parsed.split_above_bytes == proto.split_above_bytes() &&
            parsed.cluster_origin == proto.cluster_origin());
      // The server's range check reads both forms alike.
      for (uint64_t total : {uint64_t{0}, uint64_t{100}, ~uint64_t{0}}) {
        absl::StatusOr<ByteSpan> from_wire = ResolveFetchRange(parsed, total);
        absl::StatusOr<ByteSpan> from_proto = ResolveFetchRange(proto, total);
        Check(from_wire.status() == from_proto.status());
        if (from_wire.ok()) {
          Check(from_wire->offset == from_proto->offset && from_wire->length == from_proto->length);
        }
      }
      break;
    }
    case 5: {
      v1::FetchResponse proto;
      WireFetchHeader parsed;
      bool has_header = false;
      const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
      Check(ParseWireFetchResponse(wire, parsed, has_header) == proto_ok);
      if (!proto_ok) break;
      Check(has_header == proto.has_header());
      if (has_header) CheckHeader(parsed, proto.header());
      break;
    }
    case 6: {
      v1::BatchFetchItem proto;
      WireBatchFetchItem parsed;
      parsed.info.name = "stale";  // reset by the parse
      parsed.has_inline_data = true;
      const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
      Check(ParseWireBatchFetchItem(wire, /*nesting=*/0, parsed) == proto_ok);
      if (!proto_ok) break;
      Check(parsed.index == proto.index() && parsed.has_status == proto.has_status() &&
            parsed.status_code == proto.status().code() &&
            parsed.status_message == proto.status().message() &&
            parsed.has_info == proto.has_info() &&
            parsed.has_inline_data == proto.has_inline_data() &&
            std::string(parsed.inline_data.begin(), parsed.inline_data.end()) ==
                proto.inline_data());
      CheckInfo(parsed.info, proto.info());
      break;
    }
    case 7: {
      v1::BatchPutItem proto;
      WireBatchPutItem parsed;
      parsed.headers.emplace_back(wire.data(), 0);  // stale: reset by the parse
      const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
      WirePutHeader header;
      header.name = "stale";  // reset by the parse
      header.layout.shape.push_back(3);
      const bool parsed_ok = ParseWireBatchPutItem(wire, /*nesting=*/0, parsed) &&
                             ParseBatchPutHeader(parsed, /*nesting=*/0, header);
      Check(parsed_ok == proto_ok);
      if (!proto_ok) break;
      Check(!parsed.headers.empty() == proto.has_header());
      Check(SamePutHeader(header, proto.header()));
      // A header sent alone (a chunked item's) parses as the generated
      // parser parses it.
      if (parsed.headers.size() == 1) {
        v1::PutHeader alone;
        const std::span<const uint8_t> bytes = parsed.headers.front();
        const bool alone_ok = alone.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
        Check(ParseWirePutHeader(bytes, header) == alone_ok);
        if (alone_ok) Check(SamePutHeader(header, alone));
      }
      Check(std::string(parsed.data.begin(), parsed.data.end()) == proto.data());
      break;
    }
    case 8: {
      v1::AcquiredItem proto;
      WireAcquiredItem parsed;
      parsed.info.name = "stale";  // reset by the parse
      parsed.device_handle.set_backend("stale");
      const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
      Check(ParseWireAcquiredItem(wire, /*nesting=*/0, parsed) == proto_ok);
      if (proto_ok) CheckAcquiredItem(parsed, proto);
      break;
    }
    case 9: CheckBatchAnswer(wire); break;
    case 10: {
      v1::BatchFetchRequest proto;
      WireBatchFetchRequest parsed;
      parsed.items.push_back({"stale", 1});  // reset by the parse
      const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
      Check(ParseWireBatchFetchRequest(wire, parsed) == proto_ok);
      if (!proto_ok) break;
      Check(parsed.items.size() == static_cast<size_t>(proto.items_size()));
      for (int i = 0; i < proto.items_size(); ++i) {
        Check(parsed.items[i].name == proto.items(i).name() &&
              parsed.items[i].version == proto.items(i).version());
      }
      Check(parsed.prefix.has_value() == proto.has_prefix());
      Check(!parsed.prefix.has_value() || *parsed.prefix == proto.prefix());
      Check(parsed.group_version == proto.group_version() &&
            parsed.cluster_group == proto.cluster_group());
      break;
    }
    case 11: {
      v1::HandoffRequest proto;
      WirePutManyRequest parsed;
      parsed.items.emplace_back();  // reset by the parse
      const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
      if (ParseWirePutManyRequest(wire, parsed)) Check(proto_ok && SamePutMany(parsed, proto));
      break;
    }
    default: {
      v1::FetchHeader proto;
      WireFetchHeader parsed;
      const bool proto_ok = proto.ParseFromArray(wire.data(), static_cast<int>(wire.size()));
      Check(ParseWireFetchHeader(wire, parsed) == proto_ok);
      if (proto_ok) CheckHeader(parsed, proto);
      break;
    }
  }
  return 0;
}
