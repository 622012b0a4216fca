#include "server/cluster_node_host.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "service/cluster/peer_channels.h"
#include "service/common/build_info.h"
#include "service/common/log.h"

namespace tensord {

absl::StatusOr<std::unique_ptr<ClusterNodeHost>> ClusterNodeHost::Create(
    ClusterConfig config, std::string advertise_flag) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd = EtcdClient::Create(config.etcd);
  if (!etcd.ok()) return etcd.status();
  return std::unique_ptr<ClusterNodeHost>(
      new ClusterNodeHost(std::move(config), std::move(advertise_flag), std::move(*etcd)));
}

ClusterNodeHost::ClusterNodeHost(ClusterConfig config, std::string advertise_flag,
                                 std::shared_ptr<EtcdClient> etcd)
    : config_(std::move(config)),
      advertise_flag_(std::move(advertise_flag)),
      etcd_(std::move(etcd)),
      deferred_(std::make_shared<DeferredCluster>(config_.membership.node_name)) {}

ClusterNodeHost::~ClusterNodeHost() {
  Leave();
  Stop();
}

absl::Status ClusterNodeHost::Join(TensorServer& server, const ServerOptions& options) {
  absl::StatusOr<std::string> advertise =
      ChooseAdvertiseAddress(advertise_flag_, server.bound_addresses(), config_.etcd.endpoints);
  if (!advertise.ok()) return advertise.status();
  ClusterNodeOptions node_options{
      .membership = config_.membership,
      .replica_rules = config_.replica_rules,
      .max_txn_ops = config_.max_txn_ops,
      .compaction_interval = config_.compaction_interval,
      .peers =
          PeerChannelOptions{.bearer_token = config_.peer_token,
                             .peer_ca_pem = config_.peer_ca_pem,
                             .peer_tls_server_name = config_.peer_tls_server_name,
                             .client_cert_pem = options.tls.cert_chain_pem,
                             .client_key_pem = options.tls.private_key_pem,
                             .max_message_bytes = static_cast<int>(
                                 std::max<uint32_t>(options.max_message_bytes, 64 << 20)),
                             .idle_timeout = PeerIdleTimeout(options.connections.idle_timeout)},
      .watch_history_items = options.registry.watch_history_items};
  node_options.self.advertise_address = *advertise;
  node_options.self.handoff_available = !options.handoff.socket_path.empty();
  node_options.self.server_version = std::string(ReleaseVersion());
  node_options.self.start_time_unix_ms = absl::ToUnixMillis(absl::Now());
  absl::StatusOr<std::unique_ptr<ClusterNode>> joined =
      ClusterNode::Join(etcd_, server.registry(), std::move(node_options));
  if (!joined.ok()) {
    Log(LogLevel::kError, "cluster_join_failed",
        {{"node", node_name()},
         {"etcd", absl::StrJoin(config_.etcd.endpoints, ",")},
         {"error", joined.status().ToString()}});
    return joined.status();
  }
  node_ = std::move(*joined);
  deferred_->Set(node_);
  return absl::OkStatus();
}

void ClusterNodeHost::Leave() {
  if (node_ != nullptr) node_->Leave();
}

void ClusterNodeHost::Stop() {
  deferred_->Set(nullptr);
  node_.reset();
}

}  // namespace tensord
