#include "client/src/transport_selector.h"

#include "absl/strings/str_cat.h"
#include "client/src/handoff_connection.h"
#include "service/common/host_identity.h"
#include "service/wire/status_conversion.h"

namespace tensord {

absl::StatusOr<std::shared_ptr<LocalTransport>> TransportSelector::Local() {
  if (path_ == TransferPath::kRemote) {
    return absl::UnavailableError("TransferPath::kRemote: the local handoff is not used");
  }
  MutexLock lock(&mutex_);
  if (!resolved_) {
    absl::StatusOr<std::shared_ptr<LocalTransport>> found = Discover();
    if (!found.ok() && path_ == TransferPath::kLocal) return found.status();
    local_ = found.ok() ? *std::move(found) : nullptr;
    missing_ = found.status();
    resolved_ = true;
  }
  if (local_ == nullptr) return missing_;
  return local_;
}

absl::StatusOr<std::shared_ptr<LocalTransport>> TransportSelector::LocalOnly(
    const RoutedCall& routed) {
  std::shared_ptr<LocalTransport> local;
  TENSORD_ASSIGN_OR_RETURN(Transport transport, RouteCall(routed, path_, [&] {
                             absl::StatusOr<std::shared_ptr<LocalTransport>> found = Local();
                             if (found.ok()) local = *std::move(found);
                             return found.status();
                           }));
  if (transport != Transport::kLocal) {
    return absl::InternalError(
        absl::StrCat(routed.what, " is routed to gRPC, which cannot serve it"));
  }
  return local;
}

void TransportSelector::Forget(const std::shared_ptr<LocalTransport>& local) {
  MutexLock lock(&mutex_);
  if (local_ == local) {
    local_.reset();
    resolved_ = false;
  }
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
