// libFuzzer target: ParseSafetensors on arbitrary bytes. Beyond "no crash", it
// checks the promises of an accepted index: sorted, disjoint, inside the data
// section, and each range exactly the size its dtype and shape need.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "service/dlpack/tensor_layout.h"
#include "service/formats/safetensors.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<formats::SafetensorsIndex> index = formats::ParseSafetensors(file);
  if (!index.ok()) return 0;

  Check(size >= 8);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | data[i];
  const uint64_t data_start = 8 + header_bytes;
  uint64_t previous_end = data_start;
  for (const formats::SafetensorsEntry& e : index->entries) {
    Check(e.begin >= previous_end && e.begin <= e.end && e.end <= size);
    absl::StatusOr<uint64_t> bytes = dlpack::CompactByteSize(e.layout.dtype, e.layout.shape);
    Check(bytes.ok() && *bytes == e.end - e.begin);
    Check(e.layout.strides.empty());
    previous_end = e.end;
  }
  return 0;
}
