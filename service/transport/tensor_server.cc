#include "service/transport/tensor_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "service/common/fd_limits.h"
#include "service/common/listen_address.h"
#include "service/common/log.h"
#include "service/security/listen_policy.h"
#include "service/security/reader_domains.h"
#include "service/transport/connection_listener.h"
#include "service/transport/tensor_service.h"
#include "service/wire/channel_arg_milliseconds.h"

namespace tensord {
namespace {

absl::Status ValidateTls(const TlsServerOptions& tls) {
  if (tls.cert_chain_pem.empty() != tls.private_key_pem.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate chain (--tls-cert) and its private key (--tls-key)");
  }
  if (!tls.client_ca_pem.empty() && !tls.enabled()) {
    return absl::InvalidArgumentError(
        "a client CA (--tls-client-ca) needs TLS on: give --tls-cert and --tls-key too");
  }
  return absl::OkStatus();
}

// TLS (mutual when a client CA is given) or plaintext for TCP listeners.
std::shared_ptr<grpc::ServerCredentials> TcpCredentials(const TlsServerOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      tls.client_ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = tls.client_ca_pem;
  ssl.pem_key_cert_pairs.push_back({tls.private_key_pem, tls.cert_chain_pem});
  return grpc::SslServerCredentials(ssl);
}

absl::Status ValidateServerOptions(const ServerOptions& options) {
  if (options.listen_addresses.empty()) {
    return absl::InvalidArgumentError("no listen address given");
  }
  if (options.chunk_bytes == 0 || options.chunk_bytes > options.max_message_bytes - 4096) {
    return absl::InvalidArgumentError(absl::StrCat("chunk size ", options.chunk_bytes,
                                                   " must be in 1..max message size (",
                                                   options.max_message_bytes, ") - 4096"));
  }
  if (absl::Status status = ValidateTls(options.tls); !status.ok()) return status;
  for (const std::string& address : options.listen_addresses) {
    if (absl::Status status = ValidateListenAddress(address); !status.ok()) return status;
    if (absl::Status status =
            CheckPlaintextListener(address, options.tls.enabled(), options.allow_insecure_remote);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

// Tensor memory stays below the fds the connection caps may need, so a
// registry full of large tensors never keeps a client from connecting.
void LimitTensorFds(const ServerOptions& options) {
  const uint64_t open_file_limit = OpenFileLimit();
  const uint64_t grpc_cap = options.connections.max_connections != 0
                                ? options.connections.max_connections
                                : DefaultMaxConnections(open_file_limit);
  const uint64_t handoff_cap = options.handoff.socket_path.empty() ? 0
                               : options.handoff.max_connections != 0
                                   ? options.handoff.max_connections
                                   : DefaultMaxHandoffConnections(open_file_limit);
  SetTensorFdCeiling(TensorFdCeilingFor(open_file_limit, grpc_cap, handoff_cap));
}

void AddConnectionArguments(const ConnectionLimits& limits, grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             ChannelArgMilliseconds(limits.handshake_timeout));
  if (limits.idle_timeout > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               ChannelArgMilliseconds(limits.idle_timeout));
  }
  // Pings find peers that vanished without closing (a host lost, a network
  // split) while their calls hold fds; clients may ping every 10 s, even
  // between calls (docs/operations.md has the client settings).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 120'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TensorServer>> TensorServer::Start(const ServerOptions& options) {
  if (absl::Status valid = ValidateServerOptions(options); !valid.ok()) return valid;

  // Bound before anything starts, so a taken port fails fast and plainly.
  std::vector<BoundListenAddress> bound_addresses;
  for (const std::string& address : options.listen_addresses) {
    absl::StatusOr<BoundListenAddress> bound = BindListenAddress(address);
    if (!bound.ok()) return bound.status();
    bound_addresses.push_back(std::move(*bound));
  }

  LimitTensorFds(options);

  std::unique_ptr<TensorServer> server(new TensorServer());
  server->metrics_ = std::make_unique<ServiceMetrics>();
  RegistryOptions registry_options = options.registry;
  if (!registry_options.arena_domain) {
    registry_options.arena_domain = ReaderDomainsOf(options.token_grants);
  }
  server->registry_ = std::make_unique<Registry>(registry_options);
  if (!options.snapshot_dir.empty()) {
    absl::StatusOr<std::unique_ptr<SnapshotStore>> opened =
        SnapshotStore::Open(options.snapshot_dir);
    if (!opened.ok()) return opened.status();
    server->snapshots_ = std::move(*opened);
    absl::StatusOr<RestoreSummary> restored =
        server->snapshots_->Restore(*server->registry_, options.corrupt_snapshot);
    if (!restored.ok()) return restored.status();
  }
  server->tokens_ = std::make_unique<HandoffTokens>();
  server->cluster_ = options.cluster;
  server->cluster_access_ = options.cluster_access;
  server->service_ = std::make_unique<TensorService>(*server->registry_, *server->tokens_, options,
                                                     *server->metrics_, server->snapshots_.get());
  if (!options.handoff.socket_path.empty()) {
    HandoffOptions handoff_options = options.handoff;
    handoff_options.cluster = options.cluster_access.get();
    absl::StatusOr<std::unique_ptr<HandoffServer>> handoff = HandoffServer::Start(
        handoff_options, *server->registry_, *server->tokens_, *server->metrics_);
    if (!handoff.ok()) return handoff.status();
    server->handoff_ = std::move(*handoff);
  }

  grpc::EnableDefaultHealthCheckService(true);
  // Reflection lets grpcurl-style tools discover the services.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::shared_ptr<grpc::ServerCredentials> tcp_credentials = TcpCredentials(options.tls);
  // tensord binds every address and accepts itself (transport/
  // connection_listener); gRPC gets each admitted connection through an
  // acceptor with the address's credentials.
  std::vector<ConnectionListener::Endpoint> endpoints;
  for (const BoundListenAddress& bound : bound_addresses) {
    ConnectionListener::Endpoint endpoint;
    endpoint.tcp = !bound.is_unix;
    endpoint.acceptor = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
        bound.is_unix ? grpc::InsecureServerCredentials() : tcp_credentials);
    server->bound_addresses_.push_back(bound.address);
    endpoints.push_back(std::move(endpoint));
  }
  for (size_t i = 0; i < endpoints.size(); ++i) endpoints[i].bound = std::move(bound_addresses[i]);
  const ConnectionLimits& limits = options.connections;
  AddConnectionArguments(limits, builder);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "could not start gRPC server on ", absl::StrJoin(options.listen_addresses, ", "),
        options.tls.enabled()
            ? " (check that the TLS certificate, key and CA are valid PEM and the key is the "
              "certificate's)"
            : ""));
  }
  const uint64_t max_connections =
      limits.max_connections != 0 ? limits.max_connections : DefaultMaxConnections(OpenFileLimit());
  absl::StatusOr<std::unique_ptr<ConnectionListener>> listener =
      ConnectionListener::Start(std::move(endpoints), max_connections, *server->metrics_);
  if (!listener.ok()) {
    server->server_->Shutdown();
    return listener.status();
  }
  server->listener_ = std::move(*listener);
  return server;
}

size_t TensorServer::open_watches() const { return service_->open_watches(); }

TensorServer::~TensorServer() {
  if (listener_ != nullptr) listener_->Stop();
  if (service_ != nullptr) service_->EndWatches();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
  handoff_.reset();  // ends local leases before the registry goes
}

void TensorServer::Shutdown(absl::Duration grace) {
  const absl::Time deadline = absl::Now() + grace;
  const bool fetches_in_flight = service_->live_payloads() > 0;
  listener_->Stop();       // new connections are refused from here
  service_->EndWatches();  // they never end on their own
  server_->Shutdown(absl::ToChronoTime(deadline));
  if (!fetches_in_flight) return;
  // A call counts as done once its last message is queued; its bytes are in
  // the socket only when gRPC releases their slices, and a client still
  // reading them fails with EPIPE if the process is gone. So wait for the
  // slices, then give readers a moment to drain their socket buffers, all
  // within the grace.
  while (service_->live_payloads() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  absl::SleepFor(
      std::min(absl::Seconds(2), std::max(deadline - absl::Now(), absl::ZeroDuration())));
}

void TensorServer::Wait() {
  server_->Wait();
  // Local producers stop too, so nothing publishes after Wait returns: the
  // shutdown snapshot then holds every acknowledged durable put and seal.
  if (handoff_ != nullptr) handoff_->Stop();
}

}  // namespace tensord
