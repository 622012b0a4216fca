// The client end of the handoff socket: request/response calls, with the
// server's fds received into ScopedFds.
#ifndef TENSORD_CLIENT_SRC_HANDOFF_CONNECTION_H_
#define TENSORD_CLIENT_SRC_HANDOFF_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "client/src/lease_releaser.h"
#include "google/protobuf/arena.h"
#include "service/common/mutex.h"
#include "service/common/scoped_fd.h"
#include "service/common/unix_socket.h"
#include "service/wire/handoff_batch_answer.h"
#include "tensord/v1/handoff.pb.h"

namespace tensord {

// Thread-safe: calls are serialised, one request in flight at a time.
class HandoffConnection {
 public:
  // Where a token comes from when the server does not know our uid.
  using TokenSource = std::function<absl::StatusOr<std::string>()>;

  static absl::StatusOr<std::shared_ptr<HandoffConnection>> Connect(const std::string& path,
                                                                    TokenSource token_source);

  struct Response {
    // The answer lives on an arena of its own: a batch answer's thousands
    // of submessages and strings cost no malloc and free each (a fifth of
    // the client's CPU in a local BatchFetch of 1024 small tensors).
    std::unique_ptr<google::protobuf::Arena> arena;
    v1::HandoffResponse* message = nullptr;  // on `arena`
    ScopedFd fd;
    std::vector<ScopedFd> more_fds;  // a batch answer's fds after the first
  };
  // Sends `request` and returns the server's answer; a non-OK code in the
  // answer comes back as that status. Authenticates once with a token and
  // retries when the server refuses our credentials.
  absl::StatusOr<Response> Call(v1::HandoffRequest request);

  // One packet of a batch acquire's answer, parsed by hand
  // (ParseWireBatchAnswer): its items are viewed in `bytes`, not parsed.
  struct BatchPacket {
    std::string bytes;
    WireBatchAnswer answer;  // views `bytes`
    ScopedFd fd;
    std::vector<ScopedFd> more_fds;  // the fds after the first
  };
  // A batch acquire: `on_packet` gets every packet of the answer in order,
  // under this connection's lock. The next packet (AcquireMore, while one
  // says more) is asked for before `on_packet` runs, so the server writes
  // it meanwhile. An error from `on_packet` ends the call and closes the
  // connection (the rest of the answer is never read). `request` gets its
  // id and the releases it carries; `appended_fields`, serialized
  // HandoffRequest fields framed by hand (batch_request_wire.h), go after
  // its own.
  absl::Status CallBatch(v1::HandoffRequest& request, absl::string_view appended_fields,
                         absl::FunctionRef<absl::Status(BatchPacket&)> on_packet);
  // Requests 0..count-1 of one call, each passing `fd`, answered in order.
  // `fill(i, request, appended_fields)` makes request i (its kind's field
  // may be framed by hand into `appended_fields`, as CallBatch's is); `on_answer(i, delivered,
  // answer)` takes its answer, or why it has none: with `delivered` false the request never reached
  // the server (fill or send failed); with it true and a status that is not the server's answer
  // (IsServerAnswer, or a use_remote refusal: IsUseRemote), what the server did with it is unknown.
  // It says whether to go on. Two are in flight: request i+1 is filled and sent before answer i is
  // read, so the caller fills it while the server serves request i. On a connection whose
  // credentials the server has not yet taken, the first is answered (authenticating as Call does)
  // before the next is sent. Once `fill` fails, a send fails or `on_answer` says stop, no request
  // follows, but every one sent is still answered. Under this connection's
  // lock throughout.
  using FillRequest = absl::FunctionRef<absl::Status(size_t index, v1::HandoffRequest& request,
                                                     std::string& appended_fields)>;
  using OnAnswer =
      absl::FunctionRef<bool(size_t index, bool delivered, absl::StatusOr<Response> answer)>;
  void CallPipelined(size_t count, int fd, FillRequest fill, OnAnswer on_answer);
  // Call, passing `fd` with the request (put_many's memfd).
  absl::StatusOr<Response> CallWithFd(v1::HandoffRequest request, int fd);
  // Ends a lease soon, in a batch with others, on the releaser's thread
  // (LeaseReleaser); errors are ignored (a broken connection ended it
  // anyway). Cheap enough for a tensor's destructor.
  void ReleaseLease(uint64_t lease_id) { releaser_.Release(lease_id); }

  const std::string& path() const { return path_; }
  // Names the server process at the other end (socket path and its pid from
  // SO_PEERCRED): what device imports are cached under, so connections of
  // any Client in this process to the same server share them.
  const std::string& server_identity() const { return server_identity_; }

 private:
  HandoffConnection(std::string path, std::string server_identity, ScopedFd socket,
                    TokenSource token_source)
      : path_(std::move(path)),
        server_identity_(std::move(server_identity)),
        socket_(std::move(socket)),
        token_source_(std::move(token_source)),
        releaser_([this] {
          MutexLock lock(&mutex_);
          SendReleasesLocked();
        }) {}
  // Sends the releaser's queued ids, a ReleaseRequest per Take, each
  // answered before the next.
  void SendReleasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // One ReleaseRequest of `lease_ids`, answered; errors are ignored.
  void SendReleaseLocked(std::span<const uint64_t> lease_ids) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Puts the queued ids on `request` (release_lease_ids) as far as its
  // packet has room (ReleaseIdsThatFit), sending the others first in
  // requests of their own; returns how many it carries, for releaser_.Sent
  // once it is answered.
  // `appended_bytes`: what SendLocked will append to it.
  size_t AttachReleasesLocked(v1::HandoffRequest& request, size_t appended_bytes = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Sends `request`, numbered here, with `appended_fields` after its own
  // serialized fields; a broken socket is UNAVAILABLE, and closed unless
  // `close_on_failure` is false (answers already on their way are then
  // read first).
  absl::Status SendLocked(v1::HandoffRequest& request, int fd, bool close_on_failure = true,
                          absl::string_view appended_fields = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Receives the next packet, as large as a batch answer's when `batch`.
  absl::StatusOr<ReceivedPacket> ReceiveLocked(bool batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // DeliverLocked, when nobody asks whether the request went out.
  absl::StatusOr<Response> CallLocked(v1::HandoffRequest& request, int fd = -1)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Sends `request` (with `appended_fields` after its own, as SendLocked
  // does) and reads and parses its answer; `delivered` is set once the
  // request went out.
  absl::StatusOr<Response> DeliverLocked(v1::HandoffRequest& request, int fd, bool& delivered,
                                         absl::string_view appended_fields = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The answer to request `request_id` in `packet`; a refusal as its status.
  absl::StatusOr<Response> ParseAnswerLocked(ReceivedPacket packet, uint64_t request_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The packet answering batch request `request_id`, into `packet` (its
  // answer views its bytes: it must not move after).
  absl::Status ReceiveBatchPacketLocked(uint64_t request_id, BatchPacket& packet)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // After a request's answer `answer`: whether to ask again authenticated,
  // which it is then. True for a PERMISSION_DENIED before this connection
  // authenticated, when a token comes; an error when authenticating failed.
  absl::StatusOr<bool> AuthenticatedForRetryLocked(const absl::Status& answer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // CallLocked, authenticating with a token and retrying once when refused.
  absl::StatusOr<Response> CallAuthenticatingLocked(v1::HandoffRequest& request, int fd = -1)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const std::string path_;
  const std::string server_identity_;
  Mutex mutex_;
  ScopedFd socket_ ABSL_GUARDED_BY(mutex_);
  TokenSource token_source_;
  uint64_t next_request_id_ ABSL_GUARDED_BY(mutex_) = 1;
  bool authenticated_ ABSL_GUARDED_BY(mutex_) = false;
  // Some answer on this connection was not PERMISSION_DENIED: the server
  // takes our credentials (peer uid or token), so a pipeline need not
  // wait for its first answer.
  bool credentials_accepted_ ABSL_GUARDED_BY(mutex_) = false;
  // Last: its thread stops before the socket it sends on goes.
  LeaseReleaser releaser_;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_HANDOFF_CONNECTION_H_
