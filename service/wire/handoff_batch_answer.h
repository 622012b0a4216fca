// A HandoffResponse packet answering a batch acquire (acquire_many or
// acquire_more), parsed by hand: the answer's own fields, and its items
// viewed where they lie, each parsed when the client gets to it
// (ParseWireAcquiredItem). The generated parser built an AcquiredItem, an
// AcquireResponse, a TensorInfo and a layout per item, which the client
// then copied again into its own TensorInfo: about a third of the client's
// CPU in a local BatchFetch of 1024 cached 4 KiB tensors (perf).
//
// Parses what the generated parser parses the same way, with one
// exception: a packet whose oneof holds another answer (acquire, create,
// ...) is refused here, where protobuf would keep whichever came last; the
// server never sends one. wire_tensor_info_fuzz holds it to the generated
// parser on every input.
#ifndef TENSORD_SERVICE_WIRE_HANDOFF_BATCH_ANSWER_H_
#define TENSORD_SERVICE_WIRE_HANDOFF_BATCH_ANSWER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tensord {

// A v1::AcquiredItem enclosed in a HandoffResponse and its
// AcquireManyResponse (ParseWireAcquiredItem's `nesting`).
inline constexpr int kAcquiredItemNesting = 2;

struct WireBatchAnswer {
  uint64_t request_id = 0;
  int32_t code = 0;
  std::string message;
  bool use_remote = false;
  // AcquireManyResponse: its items' bytes, viewed in the packet, in order,
  // and whether more packets follow.
  std::vector<std::span<const uint8_t>> items;
  bool more = false;
};

// False where the generated parser refuses the packet's own fields, and
// for another answer in its oneof. The items are not parsed: a packet is
// valid only if ParseWireAcquiredItem also accepts each of them. `out`'s
// items view `packet`, which must outlive them.
bool ParseWireBatchAnswer(std::span<const uint8_t> packet, WireBatchAnswer& out);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_HANDOFF_BATCH_ANSWER_H_
