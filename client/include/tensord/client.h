// tensord::Client: put and fetch named tensors on a tensord server.
#ifndef TENSORD_CLIENT_CLIENT_H_
#define TENSORD_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/dlpack/dlpack_compat.h"
#include "tensord/tensor.h"

namespace tensord {

struct ClientOptions {
  // "host:port", "unix:PATH" or any gRPC target.
  std::string server = "localhost:50051";
  // Data bytes per put chunk message.
  uint32_t chunk_bytes = 1 << 20;
  // Largest gRPC message either way; must exceed both sides' chunk sizes.
  uint32_t max_message_bytes = 8 << 20;
  // Deadline of each call; infinite by default.
  absl::Duration timeout = absl::InfiniteDuration();
  // Give this client its own TCP connection rather than sharing one with
  // other clients of the same target in the process.
  bool own_connection = true;
};

// Called as bytes move: (bytes done, bytes in total).
using ProgressCallback = std::function<void(uint64_t, uint64_t)>;

struct PutOptions {
  // Send the CRC-32C of the bytes so the server verifies them end to end
  // (DATA_LOSS on mismatch). Costs one pass over the bytes before sending.
  bool send_crc32c = false;
  ProgressCallback progress;
};

struct FetchOptions {
  // 0 means the latest version.
  uint64_t version = 0;
  // Check the received bytes against the server's CRC-32C (DATA_LOSS on
  // mismatch). Costs one pass over the bytes.
  bool verify_crc32c = false;
  ProgressCallback progress;
};

struct ListResult {
  std::vector<TensorInfo> tensors;
  std::string next_page_token;  // empty on the last page
  uint64_t total_bytes = 0;     // bytes the server holds
};

// Thread-safe: one Client may serve many threads.
class Client {
 public:
  // Creates the channel; does not wait for the server (the first call does).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Publishes `tensor` (host memory; any strides and byte_offset, packed
  // when not compact) as a new version of `name`. The caller keeps ownership
  // of the memory, which is read, never written, and not retained.
  absl::StatusOr<TensorInfo> Put(absl::string_view name, const DLTensor& tensor,
                                 const PutOptions& options = {});

  // The whole tensor, in memory of its own (256-byte aligned).
  absl::StatusOr<Tensor> Fetch(absl::string_view name, const FetchOptions& options = {});

  // Fills memory the caller owns (inference workers preallocate). dtype and
  // shape must match the stored tensor (INVALID_ARGUMENT naming both);
  // `destination` may have any strides and byte_offset.
  absl::StatusOr<TensorInfo> FetchInto(absl::string_view name, const DLTensor& destination,
                                       const FetchOptions& options = {});

  // Bytes [offset, offset + length) of the stored bytes (length 0: to the
  // end), appended to `out`. For ranged reads of large tensors.
  absl::StatusOr<TensorInfo> FetchBytes(absl::string_view name, uint64_t offset, uint64_t length,
                                        std::string& out, const FetchOptions& options = {});

  absl::StatusOr<TensorInfo> Stat(absl::string_view name, uint64_t version = 0);

  // One page of names starting with `prefix`.
  absl::StatusOr<ListResult> List(absl::string_view prefix, uint32_t page_size = 0,
                                  absl::string_view page_token = "");
  // Every page, concatenated.
  absl::StatusOr<std::vector<TensorInfo>> ListAll(absl::string_view prefix);

  // Removes `name` (only while at `version`, when not 0); returns the
  // removed version.
  absl::StatusOr<uint64_t> Delete(absl::string_view name, uint64_t version = 0);

 private:
  struct Rep;
  explicit Client(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_CLIENT_H_
