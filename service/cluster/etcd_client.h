// A client of etcd's v3 gRPC API: the key-value, lease and authentication
// calls tensord's cluster features build on. Several endpoints with
// failover, a deadline on every call, TLS, and user/password auth.
#ifndef TENSORD_SERVICE_CLUSTER_ETCD_CLIENT_H_
#define TENSORD_SERVICE_CLUSTER_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/common/mutex.h"
#include "absl/time/time.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace etcdserverpb {
class TxnRequest;
class TxnResponse;
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
};

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  // The lease the key is attached to; 0: none.
  int64_t lease = 0;
};

// Keys of a prefix as of one revision of the store.
struct EtcdRangeResult {
  std::vector<EtcdKeyValue> values;
  // The store's revision the values are current as of: a watch from
  // revision + 1 misses nothing.
  int64_t revision = 0;
};

struct EtcdWatchEvent {
  bool deleted = false;  // a DELETE (or lease expiry); otherwise a PUT
  // For a delete: the key and, in mod_revision, the revision of the delete.
  EtcdKeyValue kv;
};

// Lets another thread end a WatchPrefix that blocks in this thread.
class EtcdWatchCancel {
 public:
  // Ends the watch it guards (now or, if none runs yet, as soon as it starts).
  void Cancel();
  bool cancelled() const;

 private:
  friend class EtcdClient;
  mutable Mutex mu_;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

struct EtcdLease {
  int64_t id = 0;
  // What etcd granted, which may exceed what was asked (etcd has a minimum).
  absl::Duration ttl;
};

// Thread-safe: every method may be called from any thread at once. Errors
// are gRPC's codes as absl::Status (UNAVAILABLE when no endpoint answered),
// with the endpoint and call named in the message.
class EtcdClient {
 public:
  // INVALID_ARGUMENT, naming the value, for a malformed endpoint or TLS
  // material without https. Connects lazily: etcd need not be up yet.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(const EtcdClientOptions& options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // The key, or nullopt when it does not exist.
  absl::StatusOr<std::optional<EtcdKeyValue>> Get(absl::string_view key);
  // Every key starting with `prefix`, in key order.
  absl::StatusOr<std::vector<EtcdKeyValue>> GetPrefix(absl::string_view prefix);
  // The same, with the revision they are current as of.
  absl::StatusOr<EtcdRangeResult> RangePrefix(absl::string_view prefix);
  // `lease` 0 attaches none.
  absl::Status Put(absl::string_view key, absl::string_view value, int64_t lease = 0);
  // How many keys were deleted (0 or 1).
  absl::StatusOr<int64_t> Delete(absl::string_view key);
  // A transaction as etcd defines it (compare, then success or failure ops).
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);

  // Streams every change to keys starting with `prefix` from `start_revision`
  // on, in revision order, to `on_events` (the events of one revision are
  // never split across calls), until `on_events` returns false (OK),
  // `cancel` is cancelled (CANCELLED), or the stream breaks (UNAVAILABLE, the
  // caller watches again from its last revision + 1). Blocks. OUT_OF_RANGE
  // when etcd compacted `start_revision` away: the caller must read the
  // prefix again. The endpoints are tried in turn to open the stream.
  using WatchHandler = std::function<bool(std::vector<EtcdWatchEvent> events)>;
  absl::Status WatchPrefix(absl::string_view prefix, int64_t start_revision,
                           const WatchHandler& on_events, EtcdWatchCancel& cancel);

  absl::StatusOr<EtcdLease> GrantLease(absl::Duration ttl);
  // NOT_FOUND when the lease had already expired or been revoked.
  absl::Status RevokeLease(int64_t lease);
  // Renews the lease once; returns the TTL it has now. NOT_FOUND when etcd
  // no longer has it (expired while we could not reach etcd).
  absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease);

  // Calls that failed (after failover) since creation.
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  // The endpoints, as given.
  const std::vector<std::string>& endpoints() const;

  // The first key after every key that starts with `prefix` (etcd's
  // range_end for a prefix); "\0" when every byte is 0xff.
  static std::string PrefixRangeEnd(absl::string_view prefix);

 private:
  // One Range call (Get and GetPrefix), failing over like every call.
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request);
  struct Endpoint;
  class CallRunner;
  explicit EtcdClient(const EtcdClientOptions& options);

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
