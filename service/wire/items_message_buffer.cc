#include "service/wire/items_message_buffer.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "service/wire/message_buffer_pool.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

// The outer tag and a length of up to 5 bytes go before the items.
constexpr size_t kFramingRoom = 1 + kMaxLengthVarintBytes;

}  // namespace

ItemsMessageBuffer::ItemsMessageBuffer(uint32_t outer_field, size_t budget)
    : outer_field_(outer_field), capacity_(budget) {}

uint8_t* ItemsMessageBuffer::Reserve(size_t size, size_t referenced) {
  if (base_ == nullptr) {
    // The first item: the budget, or more for an item larger than it.
    capacity_ = std::max(capacity_, size + referenced);
    slice_ = TakeMessageBuffer(kFramingRoom + capacity_);
    base_ = const_cast<uint8_t*>(slice_.begin());
  } else if (used_ + referenced_bytes_ + size + referenced > capacity_) {
    return nullptr;
  }
  return base_ + kFramingRoom + used_;
}

void ItemsMessageBuffer::Commit(uint8_t* end) {
  used_ = static_cast<size_t>(end - (base_ + kFramingRoom));
  ++items_;
}

void ItemsMessageBuffer::CommitReferencing(uint8_t* end, grpc::Slice referenced) {
  Commit(end);
  referenced_bytes_ += referenced.size();
  references_.push_back({.at = used_, .slice = std::move(referenced)});
}

grpc::ByteBuffer ItemsMessageBuffer::Finish() {
  if (base_ == nullptr) Reserve(0);
  uint8_t framing[kFramingRoom];
  const size_t framing_size = static_cast<size_t>(
      PutLengthPrefix(outer_field_, used_ + referenced_bytes_, framing) - framing);
  const size_t start = kFramingRoom - framing_size;
  std::memcpy(base_ + start, framing, framing_size);
  if (references_.empty()) {
    grpc::Slice message = slice_.sub(start, kFramingRoom + used_);
    return grpc::ByteBuffer(&message, 1);
  }
  // The buffer's pieces (sub-slices share its memory) with the referenced
  // slices between them.
  std::vector<grpc::Slice> pieces;
  pieces.reserve(2 * references_.size() + 1);
  size_t from = start;
  for (Reference& reference : references_) {
    const size_t to = kFramingRoom + reference.at;
    if (to > from) pieces.push_back(slice_.sub(from, to));
    pieces.push_back(std::move(reference.slice));
    from = to;
  }
  if (kFramingRoom + used_ > from) pieces.push_back(slice_.sub(from, kFramingRoom + used_));
  references_.clear();
  return grpc::ByteBuffer(pieces.data(), pieces.size());
}

}  // namespace tensord
