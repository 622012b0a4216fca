#include "service/cluster/etcd_client.h"

#include <google/protobuf/arena.h>
#include <grpcpp/grpcpp.h>
#include <algorithm>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "etcd/etcd_v3.grpc.pb.h"
#include "service/cluster/etcd_status.h"
#include "service/common/errno_safe_connects.h"
#include "service/common/status_macros.h"

namespace tensord {
namespace {

// An endpoint's scheme and gRPC target.
struct ParsedEndpoint {
  bool tls = false;
  std::string target;  // host:port
};

absl::StatusOr<ParsedEndpoint> ParseEndpoint(absl::string_view endpoint, bool tls_by_default) {
  ParsedEndpoint parsed;
  absl::string_view rest = endpoint;
  if (absl::ConsumePrefix(&rest, "https://")) {
    parsed.tls = true;
  } else if (absl::ConsumePrefix(&rest, "http://")) {
    parsed.tls = false;
  } else if (absl::StrContains(rest, "://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd endpoint '", endpoint, "' has a scheme other than http:// or https://"));
  } else {
    parsed.tls = tls_by_default;
  }
  absl::ConsumeSuffix(&rest, "/");
  const size_t colon = rest.rfind(':');
  if (colon == absl::string_view::npos || colon == 0 || absl::StrContains(rest, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd endpoint '", endpoint, "' is not [http[s]://]host:port"));
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(rest.substr(colon + 1), &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd endpoint '", endpoint, "' has no port in 1..65535"));
  }
  parsed.target = std::string(rest);
  return parsed;
}

bool IsAuthTokenFailure(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         absl::StrContains(status.error_message(), "invalid auth token");
}

EtcdKeyValue FromProto(const etcdserverpb::KeyValue& kv) {
  return EtcdKeyValue{.key = kv.key(),
                      .value = kv.value(),
                      .create_revision = kv.create_revision(),
                      .mod_revision = kv.mod_revision(),
                      .version = kv.version(),
                      .lease = kv.lease()};
}

// etcd's answer as a status naming the call and endpoint; the refusals an
// operator must act on say what to do.
}  // namespace

struct EtcdClient::Endpoint {
  std::string name;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Auth::Stub> auth;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
};

absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(absl::string_view text) {
  std::vector<std::string> endpoints;
  for (absl::string_view endpoint : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    endpoint = absl::StripAsciiWhitespace(endpoint);
    TENSORD_RETURN_IF_ERROR(ParseEndpoint(endpoint, false).status());
    endpoints.emplace_back(endpoint);
  }
  if (endpoints.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' names no etcd endpoint"));
  }
  return endpoints;
}

EtcdClient::EtcdClient(const EtcdClientOptions& options) : options_(options) {}
EtcdClient::~EtcdClient() = default;

const std::vector<std::string>& EtcdClient::endpoints() const { return endpoint_names_; }

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(const EtcdClientOptions& options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoint given");
  if (options.cert_pem.empty() != options.key_pem.empty()) {
    return absl::InvalidArgumentError(
        "an etcd client certificate needs its key and a key its certificate (give both or "
        "neither)");
  }
  if (options.user.empty() != options.password.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd user '", options.user,
                     "' needs a password and a password a user (give both or neither)"));
  }
  if (options.call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd call timeout ", absl::FormatDuration(options.call_timeout), " must be positive"));
  }
  const bool tls_material = !options.ca_pem.empty() || !options.cert_pem.empty();
  std::unique_ptr<EtcdClient> client(new EtcdClient(options));
  for (const std::string& name : options.endpoints) {
    TENSORD_ASSIGN_OR_RETURN(ParsedEndpoint parsed, ParseEndpoint(name, tls_material));
    if (!parsed.tls && tls_material) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint '", name,
                       "' is http:// but TLS material (CA or client certificate) was "
                       "given: use https://"));
    }
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    if (parsed.tls) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = options.ca_pem;
      ssl.pem_cert_chain = options.cert_pem;
      ssl.pem_private_key = options.key_pem;
      credentials = grpc::SslCredentials(ssl);
    } else {
      credentials = grpc::InsecureChannelCredentials();
    }
    grpc::ChannelArguments arguments;
    // gRPC's default reconnect backoff grows to two minutes; a node must
    // notice within seconds that etcd is back, so cap it near the TTL scale.
    // (gRPC 1.51 also takes the minimum as the connect and TLS handshake
    // timeout: keep it long enough for a handshake on a busy host.)
    arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
    arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // A watch stream is long-lived and carries nothing while the directory
    // is quiet: pings notice a dead or partitioned etcd within seconds
    // (etcd permits pings every 5 s by default).
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
    auto endpoint = std::make_unique<Endpoint>();
    endpoint->name = name;
    MakeGrpcConnectsErrnoSafe();
    endpoint->channel = grpc::CreateCustomChannel(parsed.target, credentials, arguments);
    endpoint->kv = etcdserverpb::KV::NewStub(endpoint->channel);
    endpoint->lease = etcdserverpb::Lease::NewStub(endpoint->channel);
    endpoint->auth = etcdserverpb::Auth::NewStub(endpoint->channel);
    endpoint->watch = etcdserverpb::Watch::NewStub(endpoint->channel);
    client->endpoints_.push_back(std::move(endpoint));
    client->endpoint_names_.push_back(name);
  }
  return client;
}

// Runs one call with failover: each endpoint in turn, starting with the
// one that answered last, until one answers. An answer that is an error
// (NOT_FOUND, FAILED_PRECONDITION...) is etcd's verdict and is not retried
// elsewhere; a rejected auth token is renewed once.
class EtcdClient::CallRunner {
 public:
  explicit CallRunner(EtcdClient& client)
      : client_(client), timeout_(client.options_.call_timeout) {}
  CallRunner(EtcdClient& client, absl::Duration timeout) : client_(client), timeout_(timeout) {}

  template <typename Response, typename Invoke>
  absl::StatusOr<Response> Run(absl::string_view what, Invoke invoke) {
    Response response;
    TENSORD_RETURN_IF_ERROR(RunInto(what, response, invoke));
    return response;
  }

  // Run, answering into `response` (which may live on an arena).
  template <typename Response, typename Invoke>
  absl::Status RunInto(absl::string_view what, Response& response, Invoke invoke) {
    const size_t count = client_.endpoints_.size();
    const size_t first = client_.preferred_endpoint_.load(std::memory_order_relaxed) % count;
    absl::Status last;
    for (size_t attempt = 0; attempt < count; ++attempt) {
      const size_t index = (first + attempt) % count;
      Endpoint& endpoint = *client_.endpoints_[index];
      for (int auth_attempt = 0; auth_attempt < 2; ++auth_attempt) {
        grpc::ClientContext context;
        context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
        if (!client_.options_.user.empty()) {
          absl::StatusOr<std::string> token = Token(endpoint);
          if (!token.ok()) {
            last = token.status();
            break;
          }
          context.AddMetadata("token", *token);
        }
        response.Clear();
        const grpc::Status status = invoke(endpoint, context, response);
        if (status.ok()) {
          client_.preferred_endpoint_.store(index, std::memory_order_relaxed);
          return absl::OkStatus();
        }
        last = EtcdCallStatus(status, what, endpoint.name);
        if (auth_attempt == 0 && !client_.options_.user.empty() && IsAuthTokenFailure(status)) {
          MutexLock lock(&client_.token_mu_);
          client_.token_.clear();
          continue;
        }
        break;
      }
      if (!IsEtcdEndpointFailure(last)) break;
    }
    client_.errors_.fetch_add(1, std::memory_order_relaxed);
    // No endpoint answered in time: etcd is out of reach, which is what
    // UNAVAILABLE says (the call's own deadline is not the caller's).
    if (last.code() == absl::StatusCode::kDeadlineExceeded) {
      return KvTimedOut(absl::StrCat(last.message(), " (no etcd endpoint answered within ",
                                     absl::FormatDuration(timeout_), ")"));
    }
    return last;
  }

  // The cached auth token, or a fresh one from Authenticate on `endpoint`.
  absl::StatusOr<std::string> Token(Endpoint& endpoint) {
    {
      MutexLock lock(&client_.token_mu_);
      if (!client_.token_.empty()) return client_.token_;
    }
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + client_.options_.call_timeout));
    etcdserverpb::AuthenticateRequest request;
    request.set_name(client_.options_.user);
    request.set_password(client_.options_.password);
    etcdserverpb::AuthenticateResponse response;
    const grpc::Status status = endpoint.auth->Authenticate(&context, request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          absl::StrCat("etcd authentication of user '", client_.options_.user,
                                       "' at ", endpoint.name, ": ", status.error_message()));
    }
    if (response.token().empty()) {
      return absl::UnauthenticatedError(
          absl::StrCat("etcd at ", endpoint.name, " answered authentication of user '",
                       client_.options_.user, "' with an empty token (is auth enabled there?)"));
    }
    MutexLock lock(&client_.token_mu_);
    client_.token_ = response.token();
    return client_.token_;
  }

 private:
  EtcdClient& client_;
  const absl::Duration timeout_;
};

namespace {

etcdserverpb::Compare ToProto(const KvCompare& compare) {
  etcdserverpb::Compare out;
  out.set_key(compare.key);
  out.set_result(etcdserverpb::Compare::EQUAL);
  switch (compare.field) {
    case KvCompare::Field::kCreateRevision:
      out.set_target(etcdserverpb::Compare::CREATE);
      out.set_create_revision(compare.number);
      break;
    case KvCompare::Field::kModRevision:
      out.set_target(etcdserverpb::Compare::MOD);
      out.set_mod_revision(compare.number);
      break;
    case KvCompare::Field::kLease:
      out.set_target(etcdserverpb::Compare::LEASE);
      out.set_lease(compare.number);
      break;
    case KvCompare::Field::kValue:
      out.set_target(etcdserverpb::Compare::VALUE);
      out.set_value(compare.value);
      break;
  }
  return out;
}

// Whether a key etcd answered lies in what was asked: [from, range_end),
// the key `from` itself when range_end is empty, every key from `from`
// when it is "\0".
bool KeyInRange(absl::string_view key, absl::string_view from, absl::string_view range_end) {
  if (range_end.empty()) return key == from;
  return key >= from && (range_end == absl::string_view("\0", 1) || key < range_end);
}

void AddOp(const KvOp& op, etcdserverpb::RequestOp* out) {
  switch (op.kind) {
    case KvOp::Kind::kPut: {
      etcdserverpb::PutRequest* put = out->mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
      put->set_lease(op.lease);
      put->set_prev_kv(op.return_previous);
      break;
    }
    case KvOp::Kind::kDelete: {
      etcdserverpb::DeleteRangeRequest* remove = out->mutable_request_delete_range();
      remove->set_key(op.key);
      remove->set_range_end(op.range_end);
      remove->set_prev_kv(op.return_previous);
      break;
    }
    case KvOp::Kind::kGet: {
      etcdserverpb::RangeRequest* get = out->mutable_request_range();
      get->set_key(op.key);
      get->set_range_end(op.range_end);
      break;
    }
  }
}

absl::StatusOr<KvOpResult> FromProto(const KvOp& op, const etcdserverpb::ResponseOp& response) {
  KvOpResult result;
  switch (op.kind) {
    case KvOp::Kind::kPut:
      if (!response.has_response_put()) break;
      if (op.return_previous && response.response_put().has_prev_kv()) {
        result.previous.push_back(FromProto(response.response_put().prev_kv()));
      }
      return result;
    case KvOp::Kind::kDelete:
      if (!response.has_response_delete_range()) break;
      result.deleted = response.response_delete_range().deleted();
      for (const etcdserverpb::KeyValue& kv : response.response_delete_range().prev_kvs()) {
        result.previous.push_back(FromProto(kv));
      }
      return result;
    case KvOp::Kind::kGet:
      if (!response.has_response_range()) break;
      for (const etcdserverpb::KeyValue& kv : response.response_range().kvs()) {
        if (!KeyInRange(kv.key(), op.key, op.range_end)) {
          return absl::DataLossError(absl::StrCat("etcd answered a read of '", op.key,
                                                  "' with key '", kv.key(), "' outside it"));
        }
        result.values.push_back(FromProto(kv));
      }
      return result;
  }
  return absl::DataLossError(
      absl::StrCat("etcd answered an op on '", op.key, "' with a result of another kind"));
}

}  // namespace

absl::StatusOr<KvTxnResult> EtcdClient::Txn(std::span<const KvCompare> compares,
                                            std::span<const KvOp> success,
                                            std::span<const KvOp> failure) {
  // The request's and the answer's submessages (one each per op: a group
  // commit has hundreds) on one arena instead of a malloc and free each.
  google::protobuf::Arena arena;
  auto& request = *google::protobuf::Arena::CreateMessage<etcdserverpb::TxnRequest>(&arena);
  auto& response = *google::protobuf::Arena::CreateMessage<etcdserverpb::TxnResponse>(&arena);
  for (const KvCompare& compare : compares) *request.add_compare() = ToProto(compare);
  for (const KvOp& op : success) AddOp(op, request.add_success());
  for (const KvOp& op : failure) AddOp(op, request.add_failure());
  TENSORD_RETURN_IF_ERROR(CallRunner(*this).RunInto(
      "txn", response,
      [&](Endpoint& endpoint, grpc::ClientContext& context, etcdserverpb::TxnResponse& out) {
        return endpoint.kv->Txn(&context, request, &out);
      }));
  const std::span<const KvOp> ran = response.succeeded() ? success : failure;
  if (static_cast<size_t>(response.responses_size()) != ran.size()) {
    return absl::DataLossError(absl::StrCat("etcd answered a txn of ", ran.size(), " ops with ",
                                            response.responses_size(), " results"));
  }
  KvTxnResult result;
  result.succeeded = response.succeeded();
  result.revision = response.header().revision();
  result.results.reserve(ran.size());
  for (size_t i = 0; i < ran.size(); ++i) {
    TENSORD_ASSIGN_OR_RETURN(KvOpResult op,
                             FromProto(ran[i], response.responses(static_cast<int>(i))));
    result.results.push_back(std::move(op));
  }
  return result;
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::CallRange(
    const etcdserverpb::RangeRequest& request) {
  const absl::Duration timeout = request.range_end().empty()
                                     ? options_.call_timeout
                                     : std::max(options_.call_timeout, options_.scan_timeout);
  return CallRunner(*this, timeout)
      .Run<etcdserverpb::RangeResponse>(
          "range",
          [&](Endpoint& endpoint, grpc::ClientContext& context, etcdserverpb::RangeResponse& out) {
            return endpoint.kv->Range(&context, request, &out);
          });
}

absl::StatusOr<KvPage> EtcdClient::Range(absl::string_view key, absl::string_view range_end,
                                         int64_t revision, int64_t limit) {
  etcdserverpb::RangeRequest request;
  request.set_key(std::string(key));
  request.set_range_end(std::string(range_end));
  request.set_revision(revision);
  request.set_limit(limit);
  TENSORD_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse response, CallRange(request));
  if (limit > 0 && response.kvs_size() > limit) {
    return absl::DataLossError(absl::StrCat("etcd answered a range limited to ", limit,
                                            " keys with ", response.kvs_size()));
  }
  KvPage page;
  page.revision = response.header().revision();
  page.more = response.more();
  page.values.reserve(response.kvs_size());
  for (const etcdserverpb::KeyValue& kv : response.kvs()) {
    if (!KeyInRange(kv.key(), key, range_end)) {
      return absl::DataLossError(absl::StrCat("etcd answered a range from '", key, "' with key '",
                                              kv.key(), "' outside it"));
    }
    page.values.push_back(FromProto(kv));
  }
  return page;
}

absl::StatusOr<std::vector<EtcdKeyValue>> EtcdClient::KeysCreatedAt(absl::string_view key,
                                                                    absl::string_view range_end,
                                                                    int64_t revision) {
  etcdserverpb::RangeRequest request;
  request.set_key(std::string(key));
  request.set_range_end(std::string(range_end));
  request.set_min_create_revision(revision);
  request.set_max_create_revision(revision);
  TENSORD_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse response, CallRange(request));
  std::vector<EtcdKeyValue> created;
  for (const etcdserverpb::KeyValue& kv : response.kvs()) {
    if (!KeyInRange(kv.key(), key, range_end) || kv.create_revision() != revision) {
      return absl::DataLossError(absl::StrCat(
          "etcd answered a read of the keys from '", key, "' created at revision ", revision,
          " with key '", kv.key(), "' (created at ", kv.create_revision(), ")"));
    }
    created.push_back(FromProto(kv));
  }
  return created;
}

absl::Status EtcdClient::Watch(absl::string_view prefix, int64_t start_revision,
                               const WatchHandler& on_events, KvWatchCancel& cancel) {
  etcdserverpb::WatchRequest create;
  create.mutable_create_request()->set_key(std::string(prefix));
  create.mutable_create_request()->set_range_end(KvPrefixEnd(prefix));
  create.mutable_create_request()->set_start_revision(start_revision);
  create.mutable_create_request()->set_fragment(true);
  const size_t count = endpoints_.size();
  const size_t first = preferred_endpoint_.load(std::memory_order_relaxed) % count;
  absl::Status last = absl::UnavailableError("no etcd endpoint");
  for (size_t attempt = 0; attempt < count; ++attempt) {
    Endpoint& endpoint = *endpoints_[(first + attempt) % count];
    grpc::ClientContext context;
    if (!options_.user.empty()) {
      absl::StatusOr<std::string> token = CallRunner(*this).Token(endpoint);
      if (!token.ok()) {
        last = token.status();
        if (IsEtcdEndpointFailure(last)) continue;
        break;
      }
      context.AddMetadata("token", *token);
    }
    {
      MutexLock lock(&cancel.mu_);
      if (cancel.cancelled_) return absl::CancelledError("etcd watch cancelled");
      cancel.context_ = &context;
    }
    absl::Status outcome;
    bool opened = false;
    bool more = true;  // false once the handler asked to stop
    {
      std::unique_ptr<
          grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>>
          stream = endpoint.watch->Watch(&context);
      etcdserverpb::WatchResponse response;
      if (stream->Write(create) && stream->Read(&response)) {
        if (response.compact_revision() != 0) {
          outcome = absl::OutOfRangeError(
              absl::StrCat("etcd compacted revision ", start_revision,
                           " away (oldest kept: ", response.compact_revision(), ")"));
        } else if (!response.created() || response.canceled()) {
          outcome = absl::FailedPreconditionError(absl::StrCat("etcd at ", endpoint.name,
                                                               " refused a watch of '", prefix,
                                                               "': ", response.cancel_reason()));
        } else {
          opened = true;
          more = on_events({});  // established
          // A revision's events, joined across fragments before the handler sees them.
          std::vector<EtcdWatchEvent> events;
          while (more && stream->Read(&response)) {
            if (response.compact_revision() != 0) {
              outcome = absl::OutOfRangeError(
                  absl::StrCat("etcd compacted the watched revisions away (oldest kept: ",
                               response.compact_revision(), ")"));
              break;
            }
            if (response.canceled()) {
              outcome = absl::UnavailableError(absl::StrCat(
                  "etcd at ", endpoint.name, " cancelled the watch: ", response.cancel_reason()));
              break;
            }
            for (const etcdserverpb::Event& event : response.events()) {
              events.push_back(
                  EtcdWatchEvent{.deleted = event.type() == etcdserverpb::Event::DELETE,
                                 .kv = FromProto(event.kv())});
            }
            if (response.fragment() || events.empty()) continue;
            more = on_events(std::move(events));
            events.clear();
          }
          if (outcome.ok() && !more) context.TryCancel();
        }
      }
      if (!opened || !outcome.ok()) context.TryCancel();
      const grpc::Status finished = stream->Finish();
      if (outcome.ok() && opened && !cancel.cancelled()) {
        // The handler asked to stop (OK), or the stream broke.
        outcome = !more
                      ? absl::OkStatus()
                      : absl::UnavailableError(absl::StrCat("etcd watch at ", endpoint.name,
                                                            " ended: ", finished.error_message()));
      } else if (outcome.ok() && !opened) {
        outcome = absl::Status(finished.ok() ? absl::StatusCode::kUnavailable
                                             : static_cast<absl::StatusCode>(finished.error_code()),
                               absl::StrCat("etcd watch at ", endpoint.name, ": ",
                                            finished.ok() ? "closed before it was created"
                                                          : finished.error_message()));
      }
    }
    {
      MutexLock lock(&cancel.mu_);
      cancel.context_ = nullptr;
      if (cancel.cancelled_) return absl::CancelledError("etcd watch cancelled");
    }
    if (opened || !IsEtcdEndpointFailure(outcome)) {
      if (!outcome.ok()) errors_.fetch_add(1, std::memory_order_relaxed);
      return outcome;
    }
    last = outcome;
  }
  errors_.fetch_add(1, std::memory_order_relaxed);
  return last;
}

absl::Status EtcdClient::Compact(int64_t revision) {
  etcdserverpb::CompactionRequest request;
  request.set_revision(revision);
  absl::Status compacted = CallRunner(*this)
                               .Run<etcdserverpb::CompactionResponse>(
                                   "compaction",
                                   [&](Endpoint& endpoint, grpc::ClientContext& context,
                                       etcdserverpb::CompactionResponse& out) {
                                     return endpoint.kv->Compact(&context, request, &out);
                                   })
                               .status();
  // Another node compacted as far already.
  if (absl::StrContains(compacted.message(), "required revision has been compacted")) {
    return absl::OkStatus();
  }
  return compacted;
}

absl::StatusOr<EtcdLease> EtcdClient::GrantLease(absl::Duration ttl) {
  const int64_t seconds = absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)));
  if (seconds <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease TTL ", absl::FormatDuration(ttl), " must be at least 1s"));
  }
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(seconds);
  TENSORD_ASSIGN_OR_RETURN(etcdserverpb::LeaseGrantResponse response,
                           CallRunner(*this).Run<etcdserverpb::LeaseGrantResponse>(
                               "lease grant", [&](Endpoint& endpoint, grpc::ClientContext& context,
                                                  etcdserverpb::LeaseGrantResponse& out) {
                                 return endpoint.lease->LeaseGrant(&context, request, &out);
                               }));
  if (!response.error().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd refused a lease of ", seconds, "s: ", response.error()));
  }
  if (response.id() == 0 || response.ttl() <= 0) {
    return absl::DataLossError(absl::StrCat("etcd granted lease id ", response.id(), " with TTL ",
                                            response.ttl(), "s for a request of ", seconds, "s"));
  }
  return EtcdLease{.id = response.id(), .ttl = absl::Seconds(response.ttl())};
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  absl::StatusOr<etcdserverpb::LeaseRevokeResponse> response =
      CallRunner(*this).Run<etcdserverpb::LeaseRevokeResponse>(
          "lease revoke", [&](Endpoint& endpoint, grpc::ClientContext& context,
                              etcdserverpb::LeaseRevokeResponse& out) {
            return endpoint.lease->LeaseRevoke(&context, request, &out);
          });
  return response.status();
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAliveOnce(int64_t lease) {
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  // A short stream per renewal rather than one long-lived stream: each
  // renewal then has its own deadline (a blocking Read on a long stream
  // cannot time out alone) and fails over to another endpoint like any call.
  TENSORD_ASSIGN_OR_RETURN(
      etcdserverpb::LeaseKeepAliveResponse response,
      CallRunner(*this).Run<etcdserverpb::LeaseKeepAliveResponse>(
          "lease keep-alive", [&](Endpoint& endpoint, grpc::ClientContext& context,
                                  etcdserverpb::LeaseKeepAliveResponse& out) {
            std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                                     etcdserverpb::LeaseKeepAliveResponse>>
                stream = endpoint.lease->LeaseKeepAlive(&context);
            const bool answered = stream->Write(request) && stream->Read(&out);
            stream->WritesDone();
            const grpc::Status finished = stream->Finish();
            if (answered) return grpc::Status::OK;
            return finished.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                "the keep-alive stream ended without an answer")
                                 : finished;
          }));
  if (response.id() != lease) {
    return absl::DataLossError(
        absl::StrCat("etcd answered a keep-alive of lease ", lease, " for lease ", response.id()));
  }
  if (response.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd lease ", lease, " has expired"));
  }
  return absl::Seconds(response.ttl());
}

}  // namespace tensord
