// One v1::AcquiredItem of a batch acquire's answer on the handoff socket,
// written straight from the lease: the bytes the generated serializer gives
// for the same item (acquired_item_wire_test holds them byte-equal),
// without a v1::AcquiredItem, AcquireResponse and TensorInfo per item.
// Building, sizing, serializing and freeing those messages took about 40%
// of the server's CPU in a local BatchFetch of 1024 cached 4 KiB tensors
// (perf).
#ifndef TENSORD_SERVICE_TRANSPORT_ACQUIRED_ITEM_WIRE_H_
#define TENSORD_SERVICE_TRANSPORT_ACQUIRED_ITEM_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "service/registry/tensor_version.h"
#include "service/transport/tensor_info_wire.h"
#include "tensord/v1/handoff.pb.h"

namespace tensord {

// What one item says: a lease on `version`, or a refusal.
struct AcquiredItemFields {
  uint32_t index = 0;  // position in the request, or in name order
  // Set for an acquired item; must outlive the writer.
  const TensorVersion* version = nullptr;
  uint64_t lease_id = 0;
  // Host versions: AcquireResponse's mapping fields.
  uint64_t mapping_bytes = 0;
  uint64_t mapping_offset = 0;
  uint64_t arena_id = 0;
  // Device versions with an export; must outlive the writer.
  const v1::DeviceHandle* device_handle = nullptr;
  bool fd_attached = false;
  // Not OK for a refused item (then `version` is null).
  absl::Status refusal;
};

// Not thread-safe; one per item.
class AcquiredItemWire {
 public:
  explicit AcquiredItemWire(const AcquiredItemFields& fields);
  AcquiredItemWire(const AcquiredItemWire&) = delete;
  AcquiredItemWire& operator=(const AcquiredItemWire&) = delete;

  // The item as a field of AcquireManyResponse (items = 1): tag, length
  // and payload.
  size_t field_size() const { return field_size_; }
  // Writes field_size() bytes at `out`; returns the end.
  uint8_t* WriteField(uint8_t* out) const;

 private:
  const AcquiredItemFields& fields_;
  std::optional<TensorInfoWire> info_;
  size_t status_size_ = 0;   // ItemStatus payload
  size_t device_size_ = 0;   // DeviceHandle payload
  size_t acquire_size_ = 0;  // AcquireResponse payload
  size_t item_size_ = 0;     // AcquiredItem payload
  size_t field_size_ = 0;
};

// Appends a HandoffResponse's acquire_many field (8) holding `payload`,
// the bytes of an AcquireManyResponse, to `response`: a serialized
// HandoffResponse without fields above 7, which the generated serializer
// would have written before it.
void AppendAcquireManyField(const std::string& payload, std::string& response);

// AcquireManyResponse.more (field 2) set, to follow the items.
inline constexpr char kMoreItemsFollowField[] = "\x10\x01";

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_ACQUIRED_ITEM_WIRE_H_
