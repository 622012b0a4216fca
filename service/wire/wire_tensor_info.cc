#include "service/wire/wire_tensor_info.h"

#include <utility>

#include "service/wire/tensor_info_fields.h"
#include "service/wire/wire_reader.h"
#include "tensord/v1/handoff.pb.h"

namespace tensord {
namespace {

using namespace wire_reader;

bool ParseDataType(std::span<const uint8_t> bytes, int depth, WireLayout& layout) {
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireVarint): return ParseVarintAs(reader, layout.dtype_code);
      case Tag(2, kWireVarint): return ParseVarintAs(reader, layout.dtype_bits);
      case Tag(3, kWireVarint): return ParseVarintAs(reader, layout.dtype_lanes);
      default: known = false; return true;
    }
  });
}

bool ParseDevice(std::span<const uint8_t> bytes, int depth, WireLayout& layout) {
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireVarint): return ParseVarintAs(reader, layout.device_type);
      case Tag(2, kWireVarint): return ParseVarintAs(reader, layout.device_id);
      default: known = false; return true;
    }
  });
}

}  // namespace

bool ParseWireLayout(std::span<const uint8_t> bytes, int depth, WireLayout& layout) {
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited):
        layout.has_dtype = true;
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return ParseDataType(payload, inner, layout);
        });
      case Tag(2, kWireLengthDelimited):
      case Tag(2, kWireVarint): return ParseRepeatedVarints(reader, tag, layout.shape);
      case Tag(3, kWireLengthDelimited):
      case Tag(3, kWireVarint): return ParseRepeatedVarints(reader, tag, layout.strides);
      case Tag(4, kWireVarint): return ParseVarintAs(reader, layout.byte_offset);
      case Tag(5, kWireLengthDelimited):
        layout.has_device = true;
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return ParseDevice(payload, inner, layout);
        });
      default: known = false; return true;
    }
  });
}

namespace {

// One TensorInfo field into its WireTensorInfo member, by the member's type.
bool ParseMember(Reader& reader, int /*depth*/, std::string& out) {
  return ParseString(reader, out);
}
bool ParseMember(Reader& reader, int depth, WireLayout& out) {
  return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
    return ParseWireLayout(payload, inner, out);
  });
}
template <typename Int>
bool ParseMember(Reader& reader, int /*depth*/, Int& out) {
  return ParseVarintAs(reader, out);
}

bool ParseInfo(std::span<const uint8_t> bytes, int depth, WireTensorInfo& info) {
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
#define TENSORD_PARSE_INFO_FIELD(name, number, wire_type) \
  case Tag(number, wire_type):                            \
    return ParseMember(reader, depth, info.name);
      TENSORD_TENSOR_INFO_FIELDS(TENSORD_PARSE_INFO_FIELD)
#undef TENSORD_PARSE_INFO_FIELD
      default: known = false; return true;
    }
  });
}

bool ParseInfoField(Reader& reader, int depth, WireTensorInfo& info) {
  return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
    return ParseInfo(payload, inner, info);
  });
}

bool ParseFetchHeader(std::span<const uint8_t> bytes, int depth, WireFetchHeader& out) {
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited): return ParseInfoField(reader, depth, out.info);
      case Tag(2, kWireLengthDelimited):
        return ParseByteRangeField(reader, depth, out.range_offset, out.range_length);
      case Tag(3, kWireLengthDelimited):  // inline_data: bytes, no UTF-8 rule
        out.has_inline_data = true;
        return reader.Payload(out.inline_data);
      case Tag(4, kWireVarint): return ParseBool(reader, out.split);
      default: known = false; return true;
    }
  });
}

// v1::Chunk, only checked: a FetchInline answer has no use for one.
bool CheckChunk(std::span<const uint8_t> bytes, int depth) {
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireVarint): {
        uint64_t offset = 0;
        return reader.Varint(offset);
      }
      case Tag(2, kWireLengthDelimited): {
        std::span<const uint8_t> data;
        return reader.Payload(data);
      }
      default: known = false; return true;
    }
  });
}

}  // namespace

bool ParseWireTensorInfo(std::span<const uint8_t> bytes, WireTensorInfo& out) {
  return ParseInfo(bytes, kRecursionLimit, out);
}

bool ParseWireStatResponse(std::span<const uint8_t> bytes, WireTensorInfo& out) {
  return ParseFields(bytes, kRecursionLimit, [&](Reader& reader, uint32_t tag, bool& known) {
    if (tag == Tag(1, kWireLengthDelimited)) return ParseInfoField(reader, kRecursionLimit, out);
    known = false;
    return true;
  });
}

bool ParseWireFetchHeader(std::span<const uint8_t> bytes, WireFetchHeader& out) {
  return ParseFetchHeader(bytes, kRecursionLimit, out);
}

bool ParseWireFetchResponse(std::span<const uint8_t> bytes, WireFetchHeader& header,
                            bool& has_header) {
  constexpr int depth = kRecursionLimit;
  has_header = false;
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited):
        if (!has_header) header = WireFetchHeader{};
        has_header = true;
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return ParseFetchHeader(payload, inner, header);
        });
      case Tag(2, kWireLengthDelimited):
        has_header = false;
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return CheckChunk(payload, inner);
        });
      default: known = false; return true;
    }
  });
}

namespace {

// `info` back to its defaults, keeping its strings' and vectors' memory
// for the next item.
void ResetKeepingMemory(WireTensorInfo& info) {
  std::string name = std::move(info.name);
  std::vector<int64_t> shape = std::move(info.layout.shape);
  std::vector<int64_t> strides = std::move(info.layout.strides);
  std::string node = std::move(info.node);
  info = WireTensorInfo{};
  name.clear();
  shape.clear();
  strides.clear();
  node.clear();
  info.name = std::move(name);
  info.layout.shape = std::move(shape);
  info.layout.strides = std::move(strides);
  info.node = std::move(node);
}

// An ItemStatus{code = 1, message = 2} field, merged into what an earlier
// occurrence set.
bool ParseItemStatusField(Reader& reader, int depth, int32_t& code, std::string& message) {
  return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
    return ParseFields(payload, inner, [&](Reader& status, uint32_t tag, bool& known) {
      switch (tag) {
        case Tag(1, kWireVarint): return ParseVarintAs(status, code);
        case Tag(2, kWireLengthDelimited): return ParseString(status, message);
        default: known = false; return true;
      }
    });
  });
}

// v1::DeviceHandle, merged into `out` (handoff.proto's fields).
bool ParseDeviceHandle(std::span<const uint8_t> bytes, int depth, v1::DeviceHandle& out) {
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited): {
        absl::string_view backend;
        if (!ViewString(reader, backend)) return false;
        out.set_backend(std::string(backend));
        return true;
      }
      case Tag(2, kWireVarint): {
        int32_t kind = 0;
        if (!ParseVarintAs(reader, kind)) return false;
        out.set_kind(static_cast<v1::DeviceHandleKind>(kind));  // open enum: any value kept
        return true;
      }
      case Tag(3, kWireVarint): {
        int32_t device = 0;
        if (!ParseVarintAs(reader, device)) return false;
        out.set_device(device);
        return true;
      }
      case Tag(4, kWireLengthDelimited): {  // bytes, no UTF-8 rule
        std::span<const uint8_t> handle;
        if (!reader.Payload(handle)) return false;
        out.set_legacy_ipc_handle(reinterpret_cast<const char*>(handle.data()), handle.size());
        return true;
      }
      case Tag(5, kWireVarint):
      case Tag(6, kWireVarint):
      case Tag(7, kWireVarint): {
        uint64_t value = 0;
        if (!reader.Varint(value)) return false;
        if (tag == Tag(5, kWireVarint)) out.set_offset(value);
        if (tag == Tag(6, kWireVarint)) out.set_size(value);
        if (tag == Tag(7, kWireVarint)) out.set_allocation_size(value);
        return true;
      }
      case Tag(8, kWireVarint): {
        bool attached = false;
        if (!ParseBool(reader, attached)) return false;
        out.set_fd_attached(attached);
        return true;
      }
      case Tag(9, kWireFixed64): {
        uint64_t instance = 0;
        if (!reader.Fixed64(instance)) return false;
        out.set_server_instance(instance);
        return true;
      }
      default: known = false; return true;
    }
  });
}

// v1::AcquireResponse, merged into `out`'s acquire fields.
bool ParseAcquireResponse(std::span<const uint8_t> bytes, int depth, WireAcquiredItem& out) {
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireLengthDelimited):
        out.has_info = true;
        return ParseInfoField(reader, depth, out.info);
      case Tag(2, kWireVarint): return ParseVarintAs(reader, out.lease_id);
      case Tag(3, kWireVarint): return ParseVarintAs(reader, out.mapping_bytes);
      case Tag(4, kWireLengthDelimited):
        out.has_device_handle = true;
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return ParseDeviceHandle(payload, inner, out.device_handle);
        });
      case Tag(5, kWireVarint): return ParseVarintAs(reader, out.mapping_offset);
      case Tag(6, kWireVarint): return ParseVarintAs(reader, out.arena_id);
      default: known = false; return true;
    }
  });
}

}  // namespace

bool ParseWireAcquiredItem(std::span<const uint8_t> bytes, int nesting, WireAcquiredItem& out) {
  out.index = 0;
  out.has_status = false;
  out.status_code = 0;
  out.status_message.clear();
  out.use_remote = false;
  out.has_acquire = false;
  out.has_info = false;
  ResetKeepingMemory(out.info);
  out.lease_id = 0;
  out.mapping_bytes = 0;
  out.mapping_offset = 0;
  out.arena_id = 0;
  out.has_device_handle = false;
  out.device_handle.Clear();
  out.fd_attached = false;
  const int depth = kRecursionLimit - nesting;
  if (depth < 0) return false;
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireVarint): return ParseVarintAs(reader, out.index);
      case Tag(2, kWireLengthDelimited):
        out.has_status = true;
        return ParseItemStatusField(reader, depth, out.status_code, out.status_message);
      case Tag(3, kWireVarint): return ParseBool(reader, out.use_remote);
      case Tag(4, kWireLengthDelimited):
        out.has_acquire = true;
        return ParseSubmessage(reader, depth, [&](std::span<const uint8_t> payload, int inner) {
          return ParseAcquireResponse(payload, inner, out);
        });
      case Tag(5, kWireVarint): return ParseBool(reader, out.fd_attached);
      default: known = false; return true;
    }
  });
}

bool ParseWireBatchFetchItem(std::span<const uint8_t> bytes, int nesting, WireBatchFetchItem& out) {
  out.index = 0;
  out.has_status = false;
  out.status_code = 0;
  out.status_message.clear();
  out.has_info = false;
  ResetKeepingMemory(out.info);
  out.has_inline_data = false;
  out.inline_data = {};
  const int depth = kRecursionLimit - nesting;
  if (depth < 0) return false;
  return ParseFields(bytes, depth, [&](Reader& reader, uint32_t tag, bool& known) {
    switch (tag) {
      case Tag(1, kWireVarint): return ParseVarintAs(reader, out.index);
      case Tag(2, kWireLengthDelimited):
        out.has_status = true;
        return ParseItemStatusField(reader, depth, out.status_code, out.status_message);
      case Tag(3, kWireLengthDelimited):
        out.has_info = true;
        return ParseInfoField(reader, depth, out.info);
      case Tag(4, kWireLengthDelimited):  // bytes, no UTF-8 rule
        out.has_inline_data = true;
        return reader.Payload(out.inline_data);
      default: known = false; return true;
    }
  });
}

}  // namespace tensord
