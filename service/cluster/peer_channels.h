// The one way a node talks to other nodes: a channel per peer address
// (kept), with TLS to peers when the cluster has a CA, this node's
// certificate for peers that require one, its cluster token only over TLS,
// an idle close before the peer's own, and a watchdog that cancels a call
// to a peer that stopped answering (paused, partitioned) instead of letting
// it run to its deadline.
#ifndef TENSORD_SERVICE_CLUSTER_PEER_CHANNELS_H_
#define TENSORD_SERVICE_CLUSTER_PEER_CHANNELS_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "service/common/mutex.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace tensord {

struct PeerChannelOptions {
  // Bearer token this node presents to other nodes (--cluster-token-file);
  // sent only over TLS (the config refuses a token without --cluster-ca).
  std::string bearer_token;
  // TLS to the other nodes: the CA of their server certificates (empty:
  // plaintext), the name to check them against (empty: the advertise
  // host), and this node's certificate and key for peers that ask for one.
  std::string peer_ca_pem;
  std::string peer_tls_server_name;
  std::string client_cert_pem;
  std::string client_key_pem;
  // gRPC's receive limit (the peer's chunk size must fit).
  int max_message_bytes = 64 << 20;
  // A channel closes its idle connection after this, before the peer's
  // abrupt idle close can cross a call: PeerIdleTimeout of the node's own.
  absl::Duration idle_timeout = absl::InfiniteDuration();
  // A call that has not moved (no message) for this long is cancelled.
  absl::Duration stall_timeout = absl::Seconds(2);
};

// The idle timeout for channels to servers that close idle connections
// after `server_idle_timeout` (0: never): gRPC closes between one and two
// idle timeouts after the last call, so 2/5 of the server's keeps the
// client's close first; at least gRPC's minimum of 1 s.
absl::Duration PeerIdleTimeout(absl::Duration server_idle_timeout);

// Thread-safe.
class PeerChannels {
 public:
  explicit PeerChannels(PeerChannelOptions options);
  ~PeerChannels();
  PeerChannels(const PeerChannels&) = delete;
  PeerChannels& operator=(const PeerChannels&) = delete;

  // The channel to the node serving at `address`, made once.
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address);

  // Sets up `context` for a call to a peer: the deadline, and the token.
  void Prepare(grpc::ClientContext& context, absl::Duration timeout) const;

  // While it lives, `context`'s call is cancelled once it goes
  // stall_timeout without Moved(). Destroy it before the context.
  class StallGuard {
   public:
    StallGuard(const StallGuard&) = delete;
    StallGuard& operator=(const StallGuard&) = delete;
    ~StallGuard();
    // The call moved (a message arrived): its clock starts again.
    void Moved();
    // Whether the watchdog cancelled the call.
    bool stalled() const { return stalled_.load(std::memory_order_acquire); }

   private:
    friend class PeerChannels;
    StallGuard(PeerChannels& owner, grpc::ClientContext* context);
    PeerChannels& owner_;
    grpc::ClientContext* const context_;
    std::atomic<int64_t> last_moved_nanos_;
    std::atomic<bool> stalled_{false};
  };
  std::unique_ptr<StallGuard> GuardStall(grpc::ClientContext& context);

  // Cancels every guarded call (shutdown).
  void CancelAll();

  const PeerChannelOptions& options() const { return options_; }

 private:
  void WatchdogLoop();

  const PeerChannelOptions options_;
  mutable Mutex mu_;
  CondVar stop_;
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<StallGuard*, bool> guards_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_PEER_CHANNELS_H_
