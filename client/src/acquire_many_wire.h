// A batch acquire by name framed by hand as HandoffRequest's acquire_many
// field: building it with protobuf made a NameVersion message and a string
// per name only to serialize them, an eighth of the client's work in a
// local batch of small tensors. What the generated parser reads from the
// field appended to a serialized HandoffRequest is the request the
// generated serializer would write (AcquireManyWireTest).
#ifndef TENSORD_CLIENT_SRC_ACQUIRE_MANY_WIRE_H_
#define TENSORD_CLIENT_SRC_ACQUIRE_MANY_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tensord/client.h"

namespace tensord {

// AcquireManyRequest's fields for a request by name.
struct AcquireManyByName {
  std::span<const TensorRef> items;
  bool host_only = false;
  bool accepts_arena_slots = false;
  std::span<const uint64_t> mapped_arena_ids;
};

// The bytes one item adds to the field's payload.
size_t AcquireManyItemSize(const TensorRef& item);
// Appends the acquire_many field (tag, length, payload) to `out`.
void AppendAcquireManyField(const AcquireManyByName& request, std::string& out);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_ACQUIRE_MANY_WIRE_H_
