// How a whole Put or Fetch travels over a RemoteConnection: a small fetch as
// one FetchInline call, a larger one as one Fetch stream or as parts on
// several connections at once (each into its place, every part asking for
// the version the first answer named), a fetch of a version that was
// dropped between the split and its parts fetched again in one stream; a
// put as one stream or as PutPart streams. The RPCs themselves are
// RemoteConnection's.
#ifndef TENSORD_CLIENT_SRC_TRANSFER_PLAN_H_
#define TENSORD_CLIENT_SRC_TRANSFER_PLAN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/src/fetch_stream_receiver.h"
#include "client/src/remote_connection.h"
#include "client/src/transfer_streams.h"
#include "service/common/mutex.h"
#include "tensord/client.h"

namespace tensord {

// Thread-safe.
class TransferPlan {
 public:
  // `connection` must outlive the plan.
  explicit TransferPlan(RemoteConnection& connection) : connection_(connection) {}

  // A whole Fetch/FetchInto: one unary FetchInline call when the tensor is
  // (or may be) small enough to come inline; else, or when that call
  // answers with a split header, one stream, or its parts on several
  // streams at once, each received into its place. `expected_bytes`: the
  // size the caller knows (FetchInto's destination), if any.
  // `destination_for` is called once, or a second time when the version a
  // split named was dropped before its parts arrived and the latest is
  // fetched again in one stream.
  absl::StatusOr<TensorInfo> Fetch(absl::string_view name, const FetchOptions& fetch_options,
                                   const CallOptions& call,
                                   FetchStreamReceiver::DestinationFor destination_for,
                                   std::optional<uint64_t> expected_bytes);

  // A whole Put of `size` bytes at `data` under `header` (a PutRequest
  // holding the header): one stream, or parts on several streams when
  // options.streams and the size say so. Returns once gRPC gave back every
  // chunk, so the caller's memory may go.
  absl::StatusOr<TensorInfo> Put(const v1::PutRequest& header, const uint8_t* data, uint64_t size,
                                 const PutOptions& options, const CallOptions& call);

 private:
  bool ShouldFetchInline(absl::string_view name, std::optional<uint64_t> expected_bytes);
  void RememberLarge(absl::string_view name);

  // The parts of a split range, each on its stream, into the destination.
  absl::StatusOr<TensorInfo> FetchParts(absl::string_view name, const FetchOptions& fetch_options,
                                        const CallOptions& call, uint8_t* destination,
                                        const StreamedRange& whole, uint64_t split_above,
                                        unsigned cores);

  // A put in `parts`, each a PutPart stream: the server publishes once all
  // are in, and every part answers with the version.
  absl::StatusOr<TensorInfo> PutParts(const v1::PutRequest& header, const uint8_t* data,
                                      const PutOptions& options, const CallOptions& call,
                                      const std::vector<TransferPart>& parts);

  // Runs `run(i)` for every part, part 0 on the calling thread and each
  // other on a thread of its own, and returns once all have ended. When a
  // thread cannot start, the parts already running are cancelled through
  // `contexts` and joined, and the result is RESOURCE_EXHAUSTED naming
  // `what`.
  static absl::Status RunParts(size_t count, const std::function<void(size_t)>& run,
                               std::vector<std::unique_ptr<CallContext>>& contexts,
                               absl::string_view what);

  RemoteConnection& connection_;
  Mutex large_names_mutex_;
  // Names this client saw answered with a split (too large to inline);
  // their next Fetch streams at once. Looked up by string_view: no string
  // built per fetch.
  absl::flat_hash_set<std::string> large_names_ ABSL_GUARDED_BY(large_names_mutex_);
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_TRANSFER_PLAN_H_
