// A tensor's retention class, shared by the registry and the client API.
#ifndef TENSORD_CLIENT_RETENTION_H_
#define TENSORD_CLIENT_RETENTION_H_

#include <cstdint>

namespace tensord {

// How long a version may stay. Durable versions (everything but kCache) are
// written to snapshots and never evicted; kCache versions are evicted least
// recently used first when host memory runs short, and never snapshotted.
// The values are those of the wire enum tensord.v1.Retention.
enum class Retention : uint8_t {
  kDefault = 0,  // kept until deleted or replaced
  kPinned = 1,   // same; marks tensors the operator wants kept (--preload's)
  kCache = 2,    // evictable
};

inline bool IsDurable(Retention retention) { return retention != Retention::kCache; }

// "default", "pinned", "cache".
inline const char* RetentionName(Retention retention) {
  switch (retention) {
    case Retention::kDefault: return "default";
    case Retention::kPinned: return "pinned";
    case Retention::kCache: return "cache";
  }
  return "unknown";
}

}  // namespace tensord

#endif  // TENSORD_CLIENT_RETENTION_H_
