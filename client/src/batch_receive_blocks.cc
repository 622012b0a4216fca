#include "client/src/batch_receive_blocks.h"

#include <deque>
#include <utility>

#include "service/common/status_macros.h"

namespace tensord {
namespace {

// A tensor's bytes inside a block; the block owns it.
class SliceMemory final : public TensorMemory {
 public:
  explicit SliceMemory(void* data) : data_(data) {}
  void* data() override { return data_; }
  bool read_only() const override { return false; }
  bool is_copy() const override { return true; }

 private:
  void* const data_;
};

}  // namespace

struct BatchReceiveBlocks::Block {
  std::shared_ptr<HeapTensorMemory> bytes;
  // A deque: a slice handed out never moves.
  std::deque<SliceMemory> slices;
};

absl::StatusOr<std::shared_ptr<TensorMemory>> BatchReceiveBlocks::Allocate(uint64_t size) {
  if (size > kMaxSliceBytes) {
    TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<HeapTensorMemory> own, pool_.Allocate(size));
    return std::shared_ptr<TensorMemory>(std::move(own));
  }
  const uint64_t start = (used_ + kSliceAlignment - 1) / kSliceAlignment * kSliceAlignment;
  if (block_ == nullptr || start + size > kBlockBytes) {
    auto block = std::make_shared<Block>();
    TENSORD_ASSIGN_OR_RETURN(block->bytes, pool_.Allocate(kBlockBytes));
    block_ = std::move(block);
    used_ = 0;
    return Allocate(size);
  }
  used_ = start + size;
  SliceMemory& slice =
      block_->slices.emplace_back(static_cast<uint8_t*>(block_->bytes->data()) + start);
  // Shares the block's ownership: the block goes with its last slice.
  return std::shared_ptr<TensorMemory>(block_, &slice);
}

}  // namespace tensord
