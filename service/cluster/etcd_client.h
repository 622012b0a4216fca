// A client of etcd's v3 gRPC API: the KvStore tensord's cluster builds on,
// spoken to a real etcd. Several endpoints with failover, a deadline on
// every call, TLS, and user/password auth.
#ifndef TENSORD_SERVICE_CLUSTER_ETCD_CLIENT_H_
#define TENSORD_SERVICE_CLUSTER_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/cluster/kv_store.h"
#include "service/common/mutex.h"

namespace etcdserverpb {
class RangeRequest;
class RangeResponse;
}  // namespace etcdserverpb

namespace tensord {

struct EtcdClientOptions {
  // "http://host:port", "https://host:port", or "host:port" (https when any
  // TLS material is given, http otherwise). Tried in order; a failed
  // endpoint passes the call to the next.
  std::vector<std::string> endpoints;
  // PEM contents. ca_pem: the CA of etcd's server certificate (empty: the
  // system roots); cert_pem and key_pem: a client certificate, both or neither.
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  // etcd user and password; empty user: no authentication.
  std::string user;
  std::string password;
  // Deadline of each call on each endpoint.
  absl::Duration call_timeout = absl::Seconds(2);
  // Deadline of a range over many keys (a page of a listing): etcd 3.4
  // walks every key of a range to count it, whatever the limit, so the
  // first page of a million names takes it a good part of a second.
  absl::Duration scan_timeout = absl::Seconds(15);
};

// Thread-safe. Errors name the endpoint and the call; UNAVAILABLE when no
// endpoint answered. etcd's refusals that an operator must act on are
// named: its space quota (NOSPACE alarm), --max-txn-ops, --max-request-bytes.
class EtcdClient final : public KvStore {
 public:
  // INVALID_ARGUMENT, naming the value, for a malformed endpoint or TLS
  // material without https. Connects lazily: etcd need not be up yet.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(const EtcdClientOptions& options);
  ~EtcdClient() override;
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  absl::StatusOr<KvTxnResult> Txn(std::span<const KvCompare> compares,
                                  std::span<const KvOp> success,
                                  std::span<const KvOp> failure) override;
  absl::StatusOr<KvPage> Range(absl::string_view key, absl::string_view range_end, int64_t revision,
                               int64_t limit) override;
  absl::StatusOr<std::vector<EtcdKeyValue>> KeysCreatedAt(absl::string_view key,
                                                          absl::string_view range_end,
                                                          int64_t revision) override;
  // Asks etcd to fragment large revisions and joins the fragments, so no
  // watch message grows with a revision (a lease expiry deletes every key
  // on it in one revision). The endpoints are tried in turn to open it.
  absl::Status Watch(absl::string_view prefix, int64_t start_revision,
                     const WatchHandler& on_events, KvWatchCancel& cancel) override;
  absl::StatusOr<EtcdLease> GrantLease(absl::Duration ttl) override;
  absl::Status RevokeLease(int64_t lease) override;
  absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease) override;
  absl::Status Compact(int64_t revision) override;
  uint64_t errors() const override { return errors_.load(std::memory_order_relaxed); }

  // The endpoints, as given.
  const std::vector<std::string>& endpoints() const;

 private:
  struct Endpoint;
  class CallRunner;
  explicit EtcdClient(const EtcdClientOptions& options);
  // One Range call with failover; a range of many keys gets the scan
  // timeout (etcd 3.4 walks all of them).
  absl::StatusOr<etcdserverpb::RangeResponse> CallRange(const etcdserverpb::RangeRequest& request);

  const EtcdClientOptions options_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::vector<std::string> endpoint_names_;
  // The endpoint that answered last: tried first.
  std::atomic<size_t> preferred_endpoint_{0};
  std::atomic<uint64_t> errors_{0};
  mutable Mutex token_mu_;
  std::string token_ ABSL_GUARDED_BY(token_mu_);
};

// Parses "--etcd-endpoints"-style text: comma-separated endpoints, each
// checked as EtcdClientOptions::endpoints describes. INVALID_ARGUMENT names
// the bad endpoint.
absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(absl::string_view text);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_ETCD_CLIENT_H_
