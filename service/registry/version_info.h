// A version's metadata, copied out of the registry so no lock or lease is
// held: what Stat, List and watch events report.
#ifndef TENSORD_SERVICE_REGISTRY_VERSION_INFO_H_
#define TENSORD_SERVICE_REGISTRY_VERSION_INFO_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "service/dlpack/tensor_layout.h"
#include "tensord/retention.h"

namespace tensord {

// What a version is, fixed when it is published: TensorVersion (the stored
// version) and VersionInfo (a copy of it for answers and events) both
// start from these, listed once.
struct VersionDescription {
  std::string name;
  uint64_t version = 0;
  dlpack::TensorLayout layout;
  uint64_t total_bytes = 0;
  uint32_t crc32c = 0;
  absl::Time created;
  Retention retention = Retention::kDefault;
};

struct VersionInfo : VersionDescription {
  // Read from the stored version when the copy was made.
  uint64_t open_leases = 0;
  // The cluster order of the version (TensorVersion::origin); 0 outside one.
  int64_t origin = 0;
  // A publish that an equal or newer version of the name (by origin) had
  // already overtaken on this node: numbered, never installed.
  bool superseded = false;
  // In cluster watch events only: the node the version is on. Such items
  // carry name, version (that node's number), total_bytes and crc32c.
  std::string node;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_REGISTRY_VERSION_INFO_H_
