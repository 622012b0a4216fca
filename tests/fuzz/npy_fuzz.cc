// libFuzzer target: ParseNpyHeader on arbitrary bytes. Beyond "no crash", it
// checks that an accepted header is self-consistent and survives a round trip
// through EncodeNpyHeader.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "service/dlpack/data_type.h"
#include "service/dlpack/tensor_layout.h"
#include "service/formats/npy.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  const std::string_view file(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<formats::NpyHeader> partial = formats::ParseNpyHeader(file, false);
  absl::StatusOr<formats::NpyHeader> complete = formats::ParseNpyHeader(file, true);
  if (complete.ok()) Check(partial.ok());
  if (!partial.ok()) return 0;

  const formats::NpyHeader& h = *partial;
  Check(h.data_offset <= size);
  absl::StatusOr<uint64_t> bytes = dlpack::CompactByteSize(h.layout.dtype, h.layout.shape);
  Check(bytes.ok() && *bytes == h.data_bytes);
  Check(h.layout.strides.empty() || h.layout.strides.size() == h.layout.shape.size());
  if (complete.ok())
    Check(h.data_offset + h.data_bytes <= size);
  else
    Check(h.data_bytes > size - h.data_offset);

  // What we accept, we can write back and read again.
  absl::StatusOr<std::string> encoded = formats::EncodeNpyHeader(h.layout.dtype, h.layout.shape);
  Check(encoded.ok() && encoded->size() % 64 == 0);
  absl::StatusOr<formats::NpyHeader> again = formats::ParseNpyHeader(*encoded, false);
  Check(again.ok() && dlpack::operator==(again->layout.dtype, h.layout.dtype) &&
        again->layout.shape == h.layout.shape && again->data_offset == encoded->size() &&
        again->data_bytes == h.data_bytes);
  return 0;
}
