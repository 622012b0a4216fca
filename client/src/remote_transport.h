// The gRPC path: one channel to the server, the streaming Put and Fetch
// with zero-copy chunk slices, and the calls only gRPC serves (Stat, List,
// Delete, ranged fetches, Snapshot, Health, server info, handoff tokens).
// gRPC types stay in remote_transport.cc.
#ifndef TENSORD_CLIENT_SRC_REMOTE_TRANSPORT_H_
#define TENSORD_CLIENT_SRC_REMOTE_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/src/client_transport.h"
#include "tensord/client.h"

namespace tensord {

// What GetServerInfo tells a client about the local handoff.
struct ServerHandoffInfo {
  std::string handoff_socket;  // empty: the server has none
  std::string boot_id;         // of the server's host
};

// Thread-safe.
class RemoteTransport final : public ClientTransport {
 public:
  // Checks `options` (INVALID_ARGUMENT naming the bad value) and creates the
  // channel; does not wait for the server.
  static absl::StatusOr<std::shared_ptr<RemoteTransport>> Connect(const ClientOptions& options);
  ~RemoteTransport() override;

  absl::StatusOr<TensorInfo> Put(absl::string_view name, const DLTensor& tensor,
                                 const PutOptions& options, const CallOptions& call) override;
  absl::StatusOr<Tensor> Fetch(absl::string_view name, const FetchOptions& options,
                               const CallOptions& call) override;
  absl::StatusOr<TensorInfo> FetchInto(absl::string_view name, const DLTensor& destination,
                                       const FetchOptions& options,
                                       const CallOptions& call) override;
  // UNAVAILABLE: create/seal needs the local handoff.
  absl::StatusOr<std::unique_ptr<TensorWriter>> Create(absl::string_view name, DLDataType dtype,
                                                       std::span<const int64_t> shape,
                                                       const CreateOptions& options,
                                                       const CallOptions& call) override;

  // Only gRPC serves these.
  absl::StatusOr<TensorInfo> FetchBytes(absl::string_view name, uint64_t offset, uint64_t length,
                                        std::string& out, const FetchOptions& options,
                                        const CallOptions& call);
  absl::StatusOr<TensorInfo> Stat(absl::string_view name, uint64_t version,
                                  const CallOptions& call);
  absl::StatusOr<ListResult> List(absl::string_view prefix, uint32_t page_size,
                                  absl::string_view page_token, bool cluster,
                                  const CallOptions& call);
  absl::StatusOr<uint64_t> Delete(absl::string_view name, uint64_t version,
                                  const CallOptions& call);
  // One call (at most kMaxBatchItems items); remote_batch.cc.
  absl::StatusOr<BatchPutResult> BatchPut(std::span<const BatchPutItem> items,
                                          const BatchPutOptions& options,
                                          const CallOptions& call) override;
  absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> BatchFetch(const BatchSelection& selection,
                                                                 const FetchOptions& options,
                                                                 const CallOptions& call) override;
  absl::StatusOr<SnapshotResult> Snapshot(const CallOptions& call);
  absl::StatusOr<ClusterMembers> ClusterNodes(const CallOptions& call);
  // watch_stream.cc reads the call; the watch has no deadline.
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(absl::string_view prefix,
                                                     const WatchOptions& options,
                                                     const CallOptions& call);
  absl::StatusOr<std::string> Health(absl::string_view service, const CallOptions& call);
  // The selector's own calls: the client's deadline and request id.
  absl::StatusOr<ServerHandoffInfo> GetServerInfo();
  absl::StatusOr<std::string> IssueHandoffToken();

 private:
  struct Rep;
  explicit RemoteTransport(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_REMOTE_TRANSPORT_H_
