// The client's transports, and the one place where a call is routed
// between them by the rule of call_routing.h.
#ifndef TENSORD_CLIENT_SRC_TRANSPORT_SELECTOR_H_
#define TENSORD_CLIENT_SRC_TRANSPORT_SELECTOR_H_

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/src/call_routing.h"
#include "client/src/client_transport.h"
#include "client/src/local_transport.h"
#include "client/src/remote_transport.h"
#include "service/common/mutex.h"
#include "service/common/status_macros.h"
#include "tensord/client.h"

namespace tensord {

// Thread-safe. Applies the routing rule of call_routing.h: finds the local
// handoff connection on first use (kAuto: when the server advertises a
// socket on this host, same boot id; kLocal: the reason it cannot is the
// answer), runs each call on the transport RouteCall picks, and retries a
// local answer over gRPC when AfterLocalAnswer says so, forgetting a broken
// socket so that a later call looks for it again.
class TransportSelector {
 public:
  TransportSelector(TransferPath path, std::string handoff_socket,
                    std::shared_ptr<RemoteTransport> remote)
      : path_(path), handoff_socket_(std::move(handoff_socket)), remote_(std::move(remote)) {}

  // Runs `call(ClientTransport&)`, which returns an absl::StatusOr, on the
  // transport the rule picks for `routed`.
  template <typename Call>
  std::invoke_result_t<Call&, ClientTransport&> Run(const RoutedCall& routed, Call&& call) {
    std::shared_ptr<LocalTransport> local;
    TENSORD_ASSIGN_OR_RETURN(Transport transport, RouteCall(routed, path_, [&] {
                               absl::StatusOr<std::shared_ptr<LocalTransport>> found = Local();
                               if (found.ok()) local = *std::move(found);
                               return found.status();
                             }));
    if (transport == Transport::kLocal) {
      auto answer = call(static_cast<ClientTransport&>(*local));
      switch (AfterLocalAnswer(routed.kind, path_, RoutingStatus(answer))) {
        case AfterLocal::kStands: return answer;
        case AfterLocal::kForgetLocalAndRetry: Forget(local); break;
        case AfterLocal::kRetryRemote: break;
      }
    }
    return call(static_cast<ClientTransport&>(*remote_));
  }

  // The local connection for a call the rule serves only there (SealGroup,
  // which no ClientTransport has), or the rule's error.
  absl::StatusOr<std::shared_ptr<LocalTransport>> LocalOnly(const RoutedCall& routed);

  // The gRPC transport, for calls only it serves.
  RemoteTransport& remote() { return *remote_; }

  // The local handoff connection, or why there is none (kRemote: none is
  // looked for).
  absl::StatusOr<std::shared_ptr<LocalTransport>> Local();

 private:
  // Drops `local` (its socket broke) so that the next call looks again.
  void Forget(const std::shared_ptr<LocalTransport>& local);
  absl::StatusOr<std::shared_ptr<LocalTransport>> Discover();

  const TransferPath path_;
  const std::string handoff_socket_;  // empty: ask the server
  const std::shared_ptr<RemoteTransport> remote_;
  Mutex mutex_;
  // kAuto keeps the first discovery's outcome (a connection, or the reason
  // there is none) until Forget; kLocal looks again after a failure.
  bool resolved_ ABSL_GUARDED_BY(mutex_) = false;
  std::shared_ptr<LocalTransport> local_ ABSL_GUARDED_BY(mutex_);
  absl::Status missing_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_TRANSPORT_SELECTOR_H_
