// Which transport serves a call: the one place where the client chooses
// between the local handoff and gRPC, and where a failed local call falls
// back to gRPC.
#ifndef TENSORD_CLIENT_SRC_TRANSPORT_SELECTOR_H_
#define TENSORD_CLIENT_SRC_TRANSPORT_SELECTOR_H_

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/src/client_transport.h"
#include "client/src/local_transport.h"
#include "client/src/remote_transport.h"
#include "service/common/mutex.h"
#include "service/common/status_macros.h"
#include "tensord/client.h"

namespace tensord {

// Thread-safe.
//
// The rule: kRemote uses gRPC; kLocal uses the local handoff (the reason
// when it cannot be found or reached); kAuto uses the local handoff when the server
// advertises a socket on this host (same boot id), found on first use, and
// gRPC otherwise. Under kAuto a local call whose answer is UNAVAILABLE (the
// socket broke) or marked use_remote (only gRPC can serve it, e.g. host
// bytes of a device tensor) is retried over gRPC; a broken socket is
// forgotten so that a later call looks for it again. Create is never
// retried (Fallback::kNone): create/seal has no gRPC path.
class TransportSelector {
 public:
  TransportSelector(TransferPath path, std::string handoff_socket,
                    std::shared_ptr<RemoteTransport> remote)
      : path_(path), handoff_socket_(std::move(handoff_socket)), remote_(std::move(remote)) {}

  // Whether a failed local call may be retried over gRPC.
  enum class Fallback {
    kToRemote,  // the rule above
    kNone,      // the local answer stands (create/seal has no gRPC path)
  };

  // Runs `call(ClientTransport&)`, which returns an absl::StatusOr, on the
  // transport the rule picks, falling back as the rule and `fallback` say.
  template <typename Call>
  std::invoke_result_t<Call&, ClientTransport&> Run(Call&& call,
                                                    Fallback fallback = Fallback::kToRemote) {
    TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<LocalTransport> local, Local());
    if (local != nullptr) {
      auto result = call(static_cast<ClientTransport&>(*local));
      if (fallback == Fallback::kNone || !FallBackFrom(local, result.status())) return result;
    }
    return call(static_cast<ClientTransport&>(*remote_));
  }

  // The gRPC transport, for calls only it serves.
  RemoteTransport& remote() { return *remote_; }

  TransferPath path() const { return path_; }

  // The local transport when the rule picks it, nullptr for gRPC; with
  // kLocal, the error that kept it from being found.
  absl::StatusOr<std::shared_ptr<LocalTransport>> Local();

 private:
  // Whether `local`'s answer `status` is retried over gRPC; forgets `local`
  // when its socket broke, so that the next call looks for it again.
  bool FallBackFrom(const std::shared_ptr<LocalTransport>& local, const absl::Status& status);
  absl::StatusOr<std::shared_ptr<LocalTransport>> Discover();

  const TransferPath path_;
  const std::string handoff_socket_;  // empty: ask the server
  const std::shared_ptr<RemoteTransport> remote_;
  Mutex mutex_;
  bool resolved_ ABSL_GUARDED_BY(mutex_) = false;
  std::shared_ptr<LocalTransport> local_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_TRANSPORT_SELECTOR_H_
