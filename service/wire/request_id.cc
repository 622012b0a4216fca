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
      case '-':
      case '_':
      case '.':
      case ':':
      case '/':
      case '+':
      case '=': continue;
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

std::string OfferedRequestId(grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it =
      metadata.find(grpc::string_ref(kRequestIdMetadataKey.data(), kRequestIdMetadataKey.size()));
  if (it == metadata.end()) return std::string();
  absl::string_view offered(it->second.data(), it->second.size());
  return IsValidRequestId(offered) ? std::string(offered) : std::string();
}

void EchoRequestId(grpc::CallbackServerContext& context, const std::string& id) {
  context.AddInitialMetadata(std::string(kRequestIdMetadataKey), id);
}

}  // namespace tensord
