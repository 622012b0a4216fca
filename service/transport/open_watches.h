// The Watch calls open on a server: admitted against --max-watches, and
// ended together when the server shuts down (a watch never finishes on its
// own, so without this every shutdown would wait out its whole grace).
#ifndef TENSORD_SERVICE_TRANSPORT_OPEN_WATCHES_H_
#define TENSORD_SERVICE_TRANSPORT_OPEN_WATCHES_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/common/mutex.h"

namespace tensord {

// Thread-safe.
class OpenWatches {
 public:
  explicit OpenWatches(uint64_t max_watches) : max_watches_(max_watches) {}

  // Admits a watch; `end` finishes it with a status (it may be called once,
  // from another thread, until Close). RESOURCE_EXHAUSTED naming the limit
  // when max_watches are open; the shutdown status once EndAll has run.
  absl::StatusOr<uint64_t> Open(std::function<void(const absl::Status&)> end);
  // The watch is done; its `end` is never called after this returns.
  void Close(uint64_t id);
  // Ends every open watch with `status` and refuses later ones with it.
  void EndAll(const absl::Status& status);
  size_t count() const;

 private:
  const uint64_t max_watches_;
  mutable Mutex mutex_;
  uint64_t next_id_ ABSL_GUARDED_BY(mutex_) = 1;
  absl::flat_hash_map<uint64_t, std::function<void(const absl::Status&)>> open_
      ABSL_GUARDED_BY(mutex_);
  std::optional<absl::Status> ended_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_OPEN_WATCHES_H_
