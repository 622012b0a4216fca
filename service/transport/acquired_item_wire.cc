#include "service/transport/acquired_item_wire.h"

#include <cstring>

#include "service/wire/status_conversion.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

// handoff.proto's numbers.
enum AcquiredItemField : uint32_t {
  kIndex = 1,
  kStatus = 2,
  kUseRemote = 3,
  kAcquire = 4,
  kFdAttached = 5
};
enum AcquireResponseField : uint32_t {
  kInfo = 1,
  kLeaseId = 2,
  kMappingBytes = 3,
  kDeviceHandle = 4,
  kMappingOffset = 5,
  kArenaId = 6
};
enum ItemStatusField : uint32_t { kCode = 1, kMessage = 2 };
constexpr uint32_t kItemsField = 1;        // AcquireManyResponse.items
constexpr uint32_t kAcquireManyField = 8;  // HandoffResponse.acquire_many

// Protobuf writes a negative int32 sign-extended to 64 bits.
uint64_t Int32Bits(int32_t value) { return static_cast<uint64_t>(static_cast<int64_t>(value)); }

uint8_t* PutBytesField(uint32_t field, const void* bytes, size_t size, uint8_t* out) {
  out = PutLengthPrefix(field, size, out);
  if (size > 0) std::memcpy(out, bytes, size);
  return out + size;
}

}  // namespace

AcquiredItemWire::AcquiredItemWire(const AcquiredItemFields& fields) : fields_(fields) {
  item_size_ = ScalarFieldSize(fields.index);
  if (fields.version == nullptr) {
    const absl::Status& refusal = fields.refusal;
    status_size_ =
        ScalarFieldSize(Int32Bits(static_cast<int32_t>(refusal.code()))) +
        (refusal.message().empty() ? 0 : LengthDelimitedFieldSize(refusal.message().size()));
    item_size_ += LengthDelimitedFieldSize(status_size_) + ScalarFieldSize(IsUseRemote(refusal));
  } else {
    info_.emplace(*fields.version);
    if (fields.device_handle != nullptr) device_size_ = fields.device_handle->ByteSizeLong();
    acquire_size_ = LengthDelimitedFieldSize(info_->size()) + ScalarFieldSize(fields.lease_id) +
                    ScalarFieldSize(fields.mapping_bytes) +
                    (fields.device_handle == nullptr ? 0 : LengthDelimitedFieldSize(device_size_)) +
                    ScalarFieldSize(fields.mapping_offset) + ScalarFieldSize(fields.arena_id);
    item_size_ += LengthDelimitedFieldSize(acquire_size_);
  }
  item_size_ += ScalarFieldSize(fields.fd_attached);
  field_size_ = LengthDelimitedFieldSize(item_size_);
}

uint8_t* AcquiredItemWire::WriteField(uint8_t* out) const {
  const AcquiredItemFields& fields = fields_;
  out = PutLengthPrefix(kItemsField, item_size_, out);
  out = PutScalarField(kIndex, fields.index, out);
  if (fields.version == nullptr) {
    const absl::Status& refusal = fields.refusal;
    out = PutLengthPrefix(kStatus, status_size_, out);
    out = PutScalarField(kCode, Int32Bits(static_cast<int32_t>(refusal.code())), out);
    if (!refusal.message().empty()) {
      out = PutBytesField(kMessage, refusal.message().data(), refusal.message().size(), out);
    }
    out = PutScalarField(kUseRemote, IsUseRemote(refusal), out);
  } else {
    out = PutLengthPrefix(kAcquire, acquire_size_, out);
    out = PutLengthPrefix(kInfo, info_->size(), out);
    out = info_->Write(out);
    out = PutScalarField(kLeaseId, fields.lease_id, out);
    out = PutScalarField(kMappingBytes, fields.mapping_bytes, out);
    if (fields.device_handle != nullptr) {
      out = PutLengthPrefix(kDeviceHandle, device_size_, out);
      out = fields.device_handle->SerializeWithCachedSizesToArray(out);
    }
    out = PutScalarField(kMappingOffset, fields.mapping_offset, out);
    out = PutScalarField(kArenaId, fields.arena_id, out);
  }
  return PutScalarField(kFdAttached, fields.fd_attached, out);
}

void AppendAcquireManyField(const std::string& payload, std::string& response) {
  uint8_t prefix[16];
  const uint8_t* end = PutLengthPrefix(kAcquireManyField, payload.size(), prefix);
  response.append(reinterpret_cast<const char*>(prefix), static_cast<size_t>(end - prefix));
  response.append(payload);
}

}  // namespace tensord
