#include "client/src/transfer_streams.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"

namespace tensord {
namespace {

constexpr uint64_t kPartAlignment = uint64_t{1} << 20;

uint32_t AutoStreamsForCores(TransferDirection direction, unsigned cores) {
  if (direction == TransferDirection::kFetch)
    return std::min<uint32_t>(kMaxAutoTransferStreams, cores / 2);
  return cores >= 2 ? kMaxAutoTransferStreams : 1;
}

}  // namespace

unsigned HostCores() {
  static const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return cores;
}

absl::Status ValidateTransferStreams(uint32_t requested) {
  if (requested > kMaxTransferStreams) {
    return absl::InvalidArgumentError(
        absl::StrCat("streams ", requested, " is more than ", kMaxTransferStreams));
  }
  return absl::OkStatus();
}

uint64_t SplitAboveBytes(TransferDirection direction, uint32_t requested, unsigned cores) {
  if (requested == 1) return 0;
  if (requested > 1) return kMinStreamPartBytes;
  return AutoStreamsForCores(direction, cores) > 1 ? kAutoBytesPerStream : 0;
}

uint32_t TransferStreamsFor(TransferDirection direction, uint64_t bytes, uint32_t requested,
                            unsigned cores) {
  uint32_t streams = requested;
  if (streams == 0) {
    streams = static_cast<uint32_t>(
        std::min<uint64_t>(AutoStreamsForCores(direction, cores),
                           (bytes + kAutoBytesPerStream - 1) / kAutoBytesPerStream));
  }
  const uint64_t most = std::max<uint64_t>(1, bytes / kMinStreamPartBytes);
  return static_cast<uint32_t>(std::clamp<uint64_t>(streams, 1, most));
}

std::vector<TransferPart> SplitIntoParts(uint64_t offset, uint64_t length, uint32_t parts) {
  parts = std::max<uint32_t>(parts, 1);
  uint64_t each = length / parts / kPartAlignment * kPartAlignment;
  if (each == 0) each = length;  // too short to split: one part
  std::vector<TransferPart> split;
  for (uint64_t done = 0; done < length || split.empty();) {
    const bool last = split.size() + 1 == parts;
    const uint64_t size = last ? length - done : std::min(each, length - done);
    split.push_back({.offset = offset + done, .length = size});
    done += size;
    if (size == 0) break;
  }
  return split;
}

absl::Status CauseOfFailedParts(std::span<const absl::Status> outcomes,
                                std::initializer_list<absl::StatusCode> echoes,
                                bool deadline_passed, absl::string_view what) {
  const absl::Status* first_echo = nullptr;
  for (const absl::Status& outcome : outcomes) {
    if (outcome.ok()) continue;
    if (std::find(echoes.begin(), echoes.end(), outcome.code()) == echoes.end()) return outcome;
    if (first_echo == nullptr) first_echo = &outcome;
  }
  if (first_echo == nullptr) return absl::OkStatus();
  if (!deadline_passed) return *first_echo;
  return absl::DeadlineExceededError(
      absl::StrCat(what, " passed its deadline; its parts ended with ", first_echo->ToString()));
}

}  // namespace tensord
