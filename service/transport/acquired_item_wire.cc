#include "service/transport/acquired_item_wire.h"

#include <cstring>

#include "service/wire/status_conversion.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

// handoff.proto's numbers (namespaced: a unity build puts this file in one
// translation unit with others that have fields of the same names).
namespace acquired_item_field {
enum : uint32_t { kIndex = 1, kStatus = 2, kUseRemote = 3, kAcquire = 4, kFdAttached = 5 };
}  // namespace acquired_item_field
namespace acquire_response_field {
enum : uint32_t {
  kInfo = 1,
  kLeaseId = 2,
  kMappingBytes = 3,
  kDeviceHandle = 4,
  kMappingOffset = 5,
  kArenaId = 6
};
}  // namespace acquire_response_field
namespace item_status_field {
enum : uint32_t { kCode = 1, kMessage = 2 };
}  // namespace item_status_field
constexpr uint32_t kAcquireManyItemsField = 1;    // AcquireManyResponse.items
constexpr uint32_t kHandoffAcquireManyField = 8;  // HandoffResponse.acquire_many

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
  out = PutLengthPrefix(kAcquireManyItemsField, item_size_, out);
  out = PutScalarField(acquired_item_field::kIndex, fields.index, out);
  if (fields.version == nullptr) {
    const absl::Status& refusal = fields.refusal;
    out = PutLengthPrefix(acquired_item_field::kStatus, status_size_, out);
    out = PutScalarField(item_status_field::kCode, Int32Bits(static_cast<int32_t>(refusal.code())),
                         out);
    out = PutBytesField(item_status_field::kMessage, refusal.message(), out);
    out = PutScalarField(acquired_item_field::kUseRemote, IsUseRemote(refusal), out);
  } else {
    out = PutLengthPrefix(acquired_item_field::kAcquire, acquire_size_, out);
    out = PutLengthPrefix(acquire_response_field::kInfo, info_->size(), out);
    out = info_->Write(out);
    out = PutScalarField(acquire_response_field::kLeaseId, fields.lease_id, out);
    out = PutScalarField(acquire_response_field::kMappingBytes, fields.mapping_bytes, out);
    if (fields.device_handle != nullptr) {
      out = PutLengthPrefix(acquire_response_field::kDeviceHandle, device_size_, out);
      out = fields.device_handle->SerializeWithCachedSizesToArray(out);
    }
    out = PutScalarField(acquire_response_field::kMappingOffset, fields.mapping_offset, out);
    out = PutScalarField(acquire_response_field::kArenaId, fields.arena_id, out);
  }
  return PutScalarField(acquired_item_field::kFdAttached, fields.fd_attached, out);
}

void AppendAcquireManyField(const std::string& payload, std::string& response) {
  uint8_t prefix[16];
  const uint8_t* end = PutLengthPrefix(kHandoffAcquireManyField, payload.size(), prefix);
  response.append(reinterpret_cast<const char*>(prefix), static_cast<size_t>(end - prefix));
  response.append(payload);
}

}  // namespace tensord
