#include "service/wire/request_id.h"

#include <grpcpp/server_context.h>

#include <cstdint>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tensord {

bool IsValidRequestId(absl::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdLength) return false;
  for (char c : id) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) continue;
    switch (c) {
      case '-': case '_': case '.': case ':': case '/': case '+': case '=': continue;
      default: return false;
    }
  }
  return true;
}

std::string GenerateRequestId() {
  // One generator per thread: no lock, and ids from different threads and
  // processes differ because each is seeded from the OS.
  thread_local std::mt19937_64 generator{[] {
    std::random_device device;
    return (uint64_t{device()} << 32) ^ device();
  }()};
  return absl::StrCat(absl::Hex(generator(), absl::kZeroPad16));
}

std::string AssignRequestId(grpc::CallbackServerContext& context) {
  std::string id;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(grpc::string_ref(kRequestIdMetadataKey.data(),
                                               kRequestIdMetadataKey.size()));
      it != metadata.end()) {
    absl::string_view offered(it->second.data(), it->second.size());
    if (IsValidRequestId(offered)) id = std::string(offered);
  }
  if (id.empty()) id = GenerateRequestId();
  context.AddInitialMetadata(std::string(kRequestIdMetadataKey), id);
  return id;
}

}  // namespace tensord
