#include "service/transport/batch_fetch_items_wire.h"

#include <cstring>

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
  const uint64_t bytes = with_bytes ? version.total_bytes : 0;
  const size_t item_size = ScalarFieldSize(index) + LengthDelimitedFieldSize(info.size()) +
                           (with_bytes ? LengthDelimitedFieldSize(bytes) : 0);
  uint8_t* out = buffer_.Reserve(LengthDelimitedFieldSize(item_size));
  if (out == nullptr) return false;
  out = PutLengthPrefix(kItemsItemField, item_size, out);
  out = PutScalarField(kIndex, index, out);
  out = PutLengthPrefix(kInfo, info.size(), out);
  out = info.Write(out);
  if (with_bytes) {
    // `optional bytes`: written even when empty.
    out = PutLengthPrefix(kInlineData, bytes, out);
    if (bytes > 0) TENSORD_RETURN_IF_ERROR(copy_bytes(out));
    out += bytes;
  }
  buffer_.Commit(out);
  return true;
}

bool BatchFetchItemsWire::AddVersionReferencing(uint32_t index, const TensorVersion& version,
                                                absl::FunctionRef<grpc::Slice()> reference) {
  const TensorInfoWire info(version);
  const uint64_t bytes = version.total_bytes;
  const size_t item_size = ScalarFieldSize(index) + LengthDelimitedFieldSize(info.size()) +
                           LengthDelimitedFieldSize(bytes);
  // Everything but the bytes themselves is written here.
  const size_t written = LengthDelimitedFieldSize(item_size) - bytes;
  uint8_t* out = buffer_.Reserve(written, bytes);
  if (out == nullptr) return false;
  out = PutLengthPrefix(kItemsItemField, item_size, out);
  out = PutScalarField(kIndex, index, out);
  out = PutLengthPrefix(kInfo, info.size(), out);
  out = info.Write(out);
  out = PutLengthPrefix(kInlineData, bytes, out);
  buffer_.CommitReferencing(out, reference());
  return true;
}

grpc::ByteBuffer BatchFetchItemsWire::Finish() { return buffer_.Finish(); }

}  // namespace tensord
