// What a watch reads: a start position (with the matching names' latest
// versions, when asked) and the feed of changes after it. The registry is
// one source (this node's changes, by version); in a cluster the etcd name
// records are another (every node's durable publishes and deletes, by etcd
// revision), so one watch reactor serves both.
#ifndef TENSORD_SERVICE_REGISTRY_WATCH_SOURCE_H_
#define TENSORD_SERVICE_REGISTRY_WATCH_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/registry/change_feed.h"
#include "service/registry/version_info.h"

namespace tensord {

// Where a watcher starts: the matching names' latest versions (when asked
// for) and the position they are current as of, taken in one step.
struct WatchStart {
  std::vector<VersionInfo> existing;
  uint64_t position = 0;
};

class WatchSource {
 public:
  virtual ~WatchSource() = default;
  // The position to read changes() after and, when `with_existing`, the
  // latest version of each name starting with `prefix` as of it
  // (OUT_OF_RANGE naming `max_existing` when more match). `from_version` >
  // 0 starts there instead (no existing); OUT_OF_RANGE when it is past the
  // last position issued.
  virtual absl::StatusOr<WatchStart> StartWatch(absl::string_view prefix, bool with_existing,
                                                uint64_t from_version,
                                                size_t max_existing) const = 0;
  // The changes after a start position; watchers read and subscribe.
  virtual ChangeFeed& changes() = 0;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_REGISTRY_WATCH_SOURCE_H_
