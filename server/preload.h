// Loads every tensor of a .safetensors file into the registry at startup.
#ifndef TENSORD_SERVER_PRELOAD_H_
#define TENSORD_SERVER_PRELOAD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "service/registry/registry.h"

namespace tensord {

// Publishes each tensor of `path` as `prefix` + its name. All or nothing for
// validation: the file is parsed and checked completely before the first
// publish. A name whose latest version is durable and has the tensor's
// layout, size and CRC-32C (restored from a snapshot) is skipped, not
// published again. Returns how many tensors were published.
absl::StatusOr<uint64_t> PreloadSafetensors(Registry& registry, const std::string& path,
                                            const std::string& prefix);

}  // namespace tensord

#endif  // TENSORD_SERVER_PRELOAD_H_
