// Cluster settings from the server's flags (--etcd-*, --node-name,
// --advertise-address), checked before anything connects.
// server/server_flags.cc reads the flags; this turns their text into
// options.
#ifndef TENSORD_SERVICE_CLUSTER_CLUSTER_CONFIG_H_
#define TENSORD_SERVICE_CLUSTER_CLUSTER_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/cluster/cluster_membership.h"
#include "service/cluster/etcd_client.h"
#include "service/cluster/replica_rules.h"

namespace tensord {

// The flags' values as given.
struct ClusterFlags {
  std::string etcd_endpoints;     // empty: a single node
  std::string node_name;          // empty: this host's name
  std::string advertise_address;  // empty: from the listen addresses
  absl::Duration lease_ttl = absl::Seconds(5);
  std::string prefix = "/tensord";
  // PEM contents or paths.
  std::string ca;
  std::string cert;
  std::string key;
  std::string user;
  std::string password_file;
  // Bearer token this node presents to other nodes when it pulls from them.
  std::string cluster_token_file;
  // --default-replicas: "N" and "PREFIX=N" entries.
  std::string default_replicas;
  // PEM (contents or path) of the CA that signed the other nodes' server
  // certificates: nodes then pull from each other over TLS.
  std::string cluster_ca;
  // The name their certificates are checked against, when not their
  // advertise host.
  std::string cluster_tls_server_name;
  // Keys per etcd transaction; must not exceed etcd's --max-txn-ops.
  int64_t etcd_max_txn_ops = 128;
  // How often the history etcd keeps is compacted (0: never, for an etcd
  // that compacts itself with --auto-compaction-*).
  absl::Duration etcd_compaction_interval = absl::Minutes(5);
};

struct ClusterConfig {
  EtcdClientOptions etcd;
  MembershipOptions membership;
  // From --cluster-token-file; empty when the nodes need no token.
  std::string peer_token;
  std::vector<ReplicaRule> replica_rules;
  // From --cluster-ca and --cluster-tls-server-name; empty CA: plaintext.
  std::string peer_ca_pem;
  std::string peer_tls_server_name;
  size_t max_txn_ops = 128;
  absl::Duration compaction_interval = absl::Minutes(5);
};

// INVALID_ARGUMENT naming the flag and its value for anything malformed:
// endpoints, node name, prefix, TTL, TLS material without https, a user
// without a password file (or the reverse), an unreadable file. Must only
// be called with etcd_endpoints set.
absl::StatusOr<ClusterConfig> ClusterConfigFromFlags(const ClusterFlags& flags);

// The address this node registers for others to reach it. With
// --advertise-address: that value (host:port, not a wildcard host).
// Without: the first TCP address bound, unless other nodes could not reach
// it: a wildcard host (0.0.0.0, [::]) never, and a loopback host only when
// every etcd endpoint is loopback too (a cluster on one machine). Otherwise
// INVALID_ARGUMENT asking for --advertise-address.
absl::StatusOr<std::string> ChooseAdvertiseAddress(absl::string_view advertise_flag,
                                                   const std::vector<std::string>& bound_addresses,
                                                   const std::vector<std::string>& etcd_endpoints);

// Whether ChooseAdvertiseAddress will find an address once the server
// listens on `listen_addresses` (--listen as given: port 0 allowed), so that
// a host no other node could reach is refused as a flag error, before
// anything starts.
absl::Status CheckAdvertiseAddress(absl::string_view advertise_flag,
                                   const std::vector<std::string>& listen_addresses,
                                   const std::vector<std::string>& etcd_endpoints);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_CLUSTER_CONFIG_H_
