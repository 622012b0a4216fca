#include "service/cluster/cluster_config.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "service/cluster/node_record.h"
#include "service/common/pem_source.h"
#include "service/common/status_macros.h"

namespace tensord {
namespace {

// Splits "host:port" / "[v6]:port"; INVALID_ARGUMENT naming `flag`. Port
// 0 only when `min_port` is 0 (a listen address whose port the kernel picks).
absl::Status SplitHostPort(absl::string_view flag, absl::string_view address, std::string& host,
                           uint32_t& port, uint32_t min_port = 1) {
  const size_t colon = address.rfind(':');
  if (absl::StartsWith(address, "unix:") || colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < min_port || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " '", address, "' is not host:port with a port in ", min_port, "..65535"));
  }
  host = std::string(address.substr(0, colon));
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]"))
    host = host.substr(1, host.size() - 2);
  return absl::OkStatus();
}

bool IsWildcardHost(absl::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "*";
}

bool IsLoopbackHost(absl::string_view host) {
  return absl::EqualsIgnoreCase(host, "localhost") || absl::StartsWith(host, "127.") ||
         host == "::1";
}

// The host of an etcd endpoint ("http://h:p", "h:p").
std::string EndpointHost(absl::string_view endpoint) {
  absl::ConsumePrefix(&endpoint, "https://") || absl::ConsumePrefix(&endpoint, "http://");
  absl::ConsumeSuffix(&endpoint, "/");
  std::string host;
  uint32_t port = 0;
  if (!SplitHostPort("etcd endpoint", endpoint, host, port).ok()) return std::string(endpoint);
  return host;
}

// A secret kept in a file of its own (`flag` names it in errors).
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " '", path, "' cannot be read"));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  std::string password = contents.str();
  // One trailing newline is the editor's, not the password's.
  if (absl::EndsWith(password, "\n")) password.pop_back();
  if (absl::EndsWith(password, "\r")) password.pop_back();
  if (password.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " '", path, "' is empty"));
  }
  return password;
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

absl::StatusOr<ClusterConfig> ClusterConfigFromFlags(const ClusterFlags& flags) {
  ClusterConfig config;
  absl::StatusOr<std::vector<std::string>> endpoints = ParseEtcdEndpoints(flags.etcd_endpoints);
  if (!endpoints.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--etcd-endpoints: ", endpoints.status().message()));
  }
  config.etcd.endpoints = std::move(*endpoints);
  struct PemFlag {
    const char* flag;
    const std::string& value;
    std::string& out;
  };
  for (const PemFlag& pem : {PemFlag{"--etcd-ca", flags.ca, config.etcd.ca_pem},
                             PemFlag{"--etcd-cert", flags.cert, config.etcd.cert_pem},
                             PemFlag{"--etcd-key", flags.key, config.etcd.key_pem}}) {
    TENSORD_ASSIGN_OR_RETURN(pem.out, PemFromPathOrContents(pem.value, pem.flag));
  }
  if (config.etcd.cert_pem.empty() != config.etcd.key_pem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--etcd-cert '", flags.cert,
                                                   "' and --etcd-key '", flags.key,
                                                   "' go together: give both or neither"));
  }
  if (flags.user.empty() != flags.password_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--etcd-user '", flags.user, "' and --etcd-password-file '",
                     flags.password_file, "' go together: give both or neither"));
  }
  if (!flags.user.empty()) {
    config.etcd.user = flags.user;
    TENSORD_ASSIGN_OR_RETURN(config.etcd.password,
                             ReadSecretFile(flags.password_file, "--etcd-password-file"));
  }
  if (!flags.cluster_token_file.empty()) {
    TENSORD_ASSIGN_OR_RETURN(config.peer_token,
                             ReadSecretFile(flags.cluster_token_file, "--cluster-token-file"));
  }
  TENSORD_ASSIGN_OR_RETURN(config.replica_rules, ParseReplicaRules(flags.default_replicas));
  if (!flags.cluster_ca.empty()) {
    TENSORD_ASSIGN_OR_RETURN(config.peer_ca_pem,
                             PemFromPathOrContents(flags.cluster_ca, "--cluster-ca"));
  }
  if (!flags.cluster_tls_server_name.empty() && flags.cluster_ca.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cluster-tls-server-name '", flags.cluster_tls_server_name,
                     "' needs --cluster-ca (the nodes talk plaintext without it)"));
  }
  config.peer_tls_server_name = flags.cluster_tls_server_name;
  if (!config.peer_token.empty() && config.peer_ca_pem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cluster-token-file '", flags.cluster_token_file,
        "' needs --cluster-ca: without TLS between the nodes the token would travel in plaintext"));
  }
  // etcd's own bounds: its default --max-txn-ops is 128; one op per key.
  if (flags.etcd_max_txn_ops < 2 || flags.etcd_max_txn_ops > 100'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--etcd-max-txn-ops ", flags.etcd_max_txn_ops, " is outside 2..100000"));
  }
  config.max_txn_ops = static_cast<size_t>(flags.etcd_max_txn_ops);
  if (flags.etcd_compaction_interval < absl::ZeroDuration() ||
      (flags.etcd_compaction_interval > absl::ZeroDuration() &&
       flags.etcd_compaction_interval < absl::Seconds(1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--etcd-compaction-interval ", absl::FormatDuration(flags.etcd_compaction_interval),
        " must be 0 (off) or at least 1s"));
  }
  config.compaction_interval = flags.etcd_compaction_interval;
  // Every call must be able to fail over within a renewal period.
  config.etcd.call_timeout =
      std::clamp(flags.lease_ttl / 3, absl::Milliseconds(500), absl::Seconds(2));

  config.membership.prefix = flags.prefix;
  config.membership.node_name = flags.node_name.empty() ? HostName() : flags.node_name;
  config.membership.lease_ttl = flags.lease_ttl;
  if (absl::Status valid = ValidateNodeName(config.membership.node_name); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flags.node_name.empty() ? "--node-name (default: this host's name): " : "--node-name: ",
        valid.message()));
  }
  if (absl::Status valid = ValidateMembershipOptions(config.membership); !valid.ok()) {
    const char* flag =
        absl::StrContains(valid.message(), "prefix") ? "--etcd-prefix: " : "--etcd-lease-ttl: ";
    return absl::InvalidArgumentError(absl::StrCat(flag, valid.message()));
  }
  // Probe the TLS and endpoint combination now, so it fails as a flag error.
  TENSORD_RETURN_IF_ERROR(EtcdClient::Create(config.etcd).status());
  return config;
}

namespace {

// ChooseAdvertiseAddress, where the listen addresses may still have port 0
// when `listen_min_port` is 0.
absl::StatusOr<std::string> ChooseAmong(absl::string_view advertise_flag,
                                        const std::vector<std::string>& bound_addresses,
                                        const std::vector<std::string>& etcd_endpoints,
                                        uint32_t listen_min_port) {
  std::string host;
  uint32_t port = 0;
  if (!advertise_flag.empty()) {
    TENSORD_RETURN_IF_ERROR(SplitHostPort("--advertise-address", advertise_flag, host, port));
    if (IsWildcardHost(host)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--advertise-address '", advertise_flag,
                       "' is a wildcard address, which no other node can connect to: give this "
                       "host's name or IP"));
    }
    return std::string(advertise_flag);
  }
  const std::string* first_tcp = nullptr;
  for (const std::string& address : bound_addresses) {
    if (!absl::StartsWith(address, "unix:")) {
      first_tcp = &address;
      break;
    }
  }
  if (first_tcp == nullptr) {
    return absl::InvalidArgumentError(
        "--advertise-address is needed: this node listens on no TCP address (--listen), so "
        "there is none to advertise");
  }
  TENSORD_RETURN_IF_ERROR(SplitHostPort("--listen", *first_tcp, host, port, listen_min_port));
  if (IsWildcardHost(host)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--advertise-address is needed: the first TCP listen address '", *first_tcp,
                     "' is a wildcard, which other nodes cannot connect to"));
  }
  if (IsLoopbackHost(host)) {
    for (const std::string& endpoint : etcd_endpoints) {
      if (!IsLoopbackHost(EndpointHost(endpoint))) {
        return absl::InvalidArgumentError(
            absl::StrCat("--advertise-address is needed: the first TCP listen address '",
                         *first_tcp, "' is loopback, but etcd endpoint '", endpoint,
                         "' is not, so nodes on other hosts could not reach this one"));
      }
    }
  }
  return *first_tcp;
}

}  // namespace

absl::StatusOr<std::string> ChooseAdvertiseAddress(absl::string_view advertise_flag,
                                                   const std::vector<std::string>& bound_addresses,
                                                   const std::vector<std::string>& etcd_endpoints) {
  return ChooseAmong(advertise_flag, bound_addresses, etcd_endpoints, 1);
}

absl::Status CheckAdvertiseAddress(absl::string_view advertise_flag,
                                   const std::vector<std::string>& listen_addresses,
                                   const std::vector<std::string>& etcd_endpoints) {
  return ChooseAmong(advertise_flag, listen_addresses, etcd_endpoints, 0).status();
}

}  // namespace tensord
