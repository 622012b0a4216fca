#include "service/wire/items_message_buffer.h"

#include <algorithm>
#include <cstring>

#include "service/wire/message_buffer_pool.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

// The outer tag and a length of up to 5 bytes go before the items.
constexpr size_t kFramingRoom = 1 + kMaxLengthVarintBytes;

}  // namespace

ItemsMessageBuffer::ItemsMessageBuffer(uint32_t outer_field, size_t budget)
    : outer_field_(outer_field), capacity_(budget) {}

uint8_t* ItemsMessageBuffer::Reserve(size_t size) {
  if (base_ == nullptr) {
    // The first item: the budget, or more for an item larger than it.
    capacity_ = std::max(capacity_, size);
    slice_ = TakeMessageBuffer(kFramingRoom + capacity_);
    base_ = const_cast<uint8_t*>(slice_.begin());
  } else if (used_ + size > capacity_) {
    return nullptr;
  }
  return base_ + kFramingRoom + used_;
}

void ItemsMessageBuffer::Commit(uint8_t* end) {
  used_ = static_cast<size_t>(end - (base_ + kFramingRoom));
  ++items_;
}

grpc::ByteBuffer ItemsMessageBuffer::Finish() {
  if (base_ == nullptr) Reserve(0);
  uint8_t framing[kFramingRoom];
  const size_t framing_size =
      static_cast<size_t>(PutLengthPrefix(outer_field_, used_, framing) - framing);
  const size_t start = kFramingRoom - framing_size;
  std::memcpy(base_ + start, framing, framing_size);
  grpc::Slice message = slice_.sub(start, kFramingRoom + used_);
  return grpc::ByteBuffer(&message, 1);
}

}  // namespace tensord
