#include "client/src/transport_selector.h"

#include "absl/strings/str_cat.h"
#include "client/src/handoff_connection.h"
#include "service/common/host_identity.h"
#include "service/wire/status_conversion.h"

namespace tensord {

absl::StatusOr<std::shared_ptr<LocalTransport>> TransportSelector::Local() {
  if (path_ == TransferPath::kRemote) return nullptr;
  MutexLock lock(&mutex_);
  if (!resolved_) {
    absl::StatusOr<std::shared_ptr<LocalTransport>> found = Discover();
    if (!found.ok()) {
      if (path_ == TransferPath::kLocal) return found.status();
      found = nullptr;  // remote it is
    }
    local_ = *std::move(found);
    resolved_ = true;
  }
  return local_;
}

bool TransportSelector::FallBackFrom(const std::shared_ptr<LocalTransport>& local,
                                     const absl::Status& status) {
  if (path_ != TransferPath::kAuto) return false;
  if (IsUseRemote(status)) return true;  // the connection is fine
  // The server answered (a cluster it could not ask, a seal whose copies
  // failed): gRPC would hear the same, or publish again.
  if (IsServerAnswer(status)) return false;
  if (status.code() != absl::StatusCode::kUnavailable) return false;
  MutexLock lock(&mutex_);
  if (local_ == local) {
    local_.reset();
    resolved_ = false;
  }
  return true;
}

absl::StatusOr<std::shared_ptr<LocalTransport>> TransportSelector::Discover() {
  std::string path = handoff_socket_;
  if (path.empty()) {
    TENSORD_ASSIGN_OR_RETURN(ServerHandoffInfo info, remote_->GetServerInfo());
    if (info.handoff_socket.empty()) {
      return absl::UnavailableError("the server has local handoff turned off (--handoff-socket)");
    }
    if (info.boot_id.empty() || info.boot_id != BootId()) {
      return absl::UnavailableError(absl::StrCat("the server runs on another host (boot id ",
                                                 info.boot_id, ", ours ", BootId(), ")"));
    }
    path = std::move(info.handoff_socket);
  }
  // The connection may outlive the Client (tensors hold it for their
  // leases): it must not keep a dangling reference to the gRPC transport.
  std::weak_ptr<RemoteTransport> remote = remote_;
  TENSORD_ASSIGN_OR_RETURN(
      std::shared_ptr<HandoffConnection> connection,
      HandoffConnection::Connect(path, [remote]() -> absl::StatusOr<std::string> {
        std::shared_ptr<RemoteTransport> alive = remote.lock();
        if (alive == nullptr) {
          return absl::UnavailableError("the client that opened this handoff connection is gone");
        }
        return alive->IssueHandoffToken();
      }));
  return std::make_shared<LocalTransport>(std::move(connection));
}

}  // namespace tensord
