#include "service/transport/batch_fetch_items_wire.h"

#include <optional>

#include "service/common/status_macros.h"
#include "service/transport/tensor_info_wire.h"
#include "service/wire/varint.h"

namespace tensord {
namespace {

// tensor_service.proto's numbers.
constexpr uint32_t kResponseItemsField = 3;  // BatchFetchResponse.items
constexpr uint32_t kItemsItemField = 1;      // BatchFetchItems.items
enum ItemField : uint32_t { kIndex = 1, kStatus = 2, kInfo = 3, kInlineData = 4 };
enum StatusField : uint32_t { kCode = 1, kMessage = 2 };

// `message` cut to at most kMaxItemStatusMessageBytes, never inside a
// UTF-8 character.
absl::string_view CutMessage(absl::string_view message) {
  if (message.size() <= kMaxItemStatusMessageBytes) return message;
  size_t cut = kMaxItemStatusMessageBytes;
  while (cut > 0 && (static_cast<uint8_t>(message[cut]) & 0xc0) == 0x80) --cut;
  return message.substr(0, cut);
}

// Writes an item of a version up to its bytes (the item's frame, index and
// info, and with `bytes` the inline_data field's prefix, written even for
// none: `optional bytes`); the last `referenced` of them follow by
// reference, the rest are the caller's to write. nullptr when the item
// does not fit.
uint8_t* BeginVersionItem(ItemsMessageBuffer& buffer, uint32_t index, const TensorInfoWire& info,
                          std::optional<uint64_t> bytes, uint64_t referenced) {
  const size_t item_size = ScalarFieldSize(index) + LengthDelimitedFieldSize(info.size()) +
                           (bytes.has_value() ? LengthDelimitedFieldSize(*bytes) : 0);
  uint8_t* out = buffer.Reserve(LengthDelimitedFieldSize(item_size) - referenced, referenced);
  if (out == nullptr) return nullptr;
  out = PutLengthPrefix(kItemsItemField, item_size, out);
  out = PutScalarField(kIndex, index, out);
  out = PutLengthPrefix(kInfo, info.size(), out);
  out = info.Write(out);
  if (bytes.has_value()) out = PutLengthPrefix(kInlineData, *bytes, out);
  return out;
}

}  // namespace

BatchFetchItemsWire::BatchFetchItemsWire(size_t budget) : buffer_(kResponseItemsField, budget) {}

bool BatchFetchItemsWire::AddFailure(uint32_t index, const absl::Status& status) {
  const absl::string_view message = CutMessage(status.message());
  // Protobuf writes an int32 sign-extended; codes are positive.
  const uint64_t code = static_cast<uint64_t>(static_cast<int64_t>(status.raw_code()));
  const size_t status_size =
      ScalarFieldSize(code) + (message.empty() ? 0 : LengthDelimitedFieldSize(message.size()));
  const size_t item_size = ScalarFieldSize(index) + LengthDelimitedFieldSize(status_size);
  uint8_t* out = buffer_.Reserve(LengthDelimitedFieldSize(item_size));
  if (out == nullptr) return false;
  out = PutLengthPrefix(kItemsItemField, item_size, out);
  out = PutScalarField(kIndex, index, out);
  out = PutLengthPrefix(kStatus, status_size, out);
  out = PutScalarField(kCode, code, out);
  out = PutBytesField(kMessage, message, out);
  buffer_.Commit(out);
  return true;
}

absl::StatusOr<bool> BatchFetchItemsWire::AddVersion(
    uint32_t index, const TensorVersion& version, bool with_bytes,
    absl::FunctionRef<absl::Status(uint8_t*)> copy_bytes) {
  const TensorInfoWire info(version);
  const std::optional<uint64_t> bytes =
      with_bytes ? std::optional<uint64_t>(version.total_bytes) : std::nullopt;
  uint8_t* out = BeginVersionItem(buffer_, index, info, bytes, /*referenced=*/0);
  if (out == nullptr) return false;
  if (bytes.value_or(0) > 0) TENSORD_RETURN_IF_ERROR(copy_bytes(out));
  buffer_.Commit(out + bytes.value_or(0));
  return true;
}

bool BatchFetchItemsWire::AddVersionReferencing(uint32_t index, const TensorVersion& version,
                                                absl::FunctionRef<grpc::Slice()> reference) {
  const TensorInfoWire info(version);
  uint8_t* out = BeginVersionItem(buffer_, index, info, version.total_bytes,
                                  /*referenced=*/version.total_bytes);
  if (out == nullptr) return false;
  buffer_.CommitReferencing(out, reference());
  return true;
}

grpc::ByteBuffer BatchFetchItemsWire::Finish() { return buffer_.Finish(); }

}  // namespace tensord
