// The zero-copy local path: leases and memfds from the handoff socket,
// mapped into this process and cached per (name, version).
#ifndef TENSORD_CLIENT_SRC_LOCAL_HANDOFF_H_
#define TENSORD_CLIENT_SRC_LOCAL_HANDOFF_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "service/common/mutex.h"
#include "client/src/handoff_connection.h"
#include "tensord/client.h"
#include "tensord/tensor.h"

namespace tensord {

// One version this process holds a lease and memfd for; shared by every
// Tensor mapped from it. The lease ends when the last of them is gone.
class HeldVersion;

// Thread-safe.
class LocalHandoff {
 public:
  explicit LocalHandoff(std::shared_ptr<HandoffConnection> connection)
      : connection_(std::move(connection)) {}

  // A tensor mapping the server's bytes: a private copy-on-write mapping
  // (writable, changes stay in this process) or, with `read_only`, the
  // shared read-only mapping with DLPACK_FLAG_BITMASK_READ_ONLY.
  absl::StatusOr<Tensor> Fetch(absl::string_view name, uint64_t version, bool read_only);

  // Copies the held bytes into `destination` (any strides).
  absl::StatusOr<TensorInfo> FetchInto(absl::string_view name, uint64_t version,
                                       const DLTensor& destination);

  // create + copy + seal: one copy, no gRPC.
  absl::StatusOr<TensorInfo> Put(absl::string_view name, const DLTensor& tensor, bool send_crc32c,
                                 Retention retention);

  absl::StatusOr<std::unique_ptr<TensorWriter>> Create(absl::string_view name, DLDataType dtype,
                                                       std::span<const int64_t> shape,
                                                       Retention retention);

  const std::shared_ptr<HandoffConnection>& connection() const { return connection_; }

 private:
  absl::StatusOr<std::shared_ptr<HeldVersion>> Hold(absl::string_view name, uint64_t version);

  std::shared_ptr<HandoffConnection> connection_;
  Mutex mutex_;
  // Held versions by (name, version); expired entries are pruned on insert.
  absl::flat_hash_map<std::pair<std::string, uint64_t>, std::weak_ptr<HeldVersion>> held_
      ABSL_GUARDED_BY(mutex_);
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_LOCAL_HANDOFF_H_
