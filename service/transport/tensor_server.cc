#include "service/transport/tensor_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "service/common/log.h"
#include "service/security/listen_policy.h"
#include "service/transport/tensor_service.h"

namespace tensord {
namespace {

// "unix:PATH", "unix:///PATH", "host:port" or "[v6]:port".
absl::Status ValidateListenAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) {
    if (address.size() == 5) {
      return absl::InvalidArgumentError(absl::StrCat("listen address '", address, "' has no path"));
    }
    return absl::OkStatus();
  }
  size_t colon = address.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "listen address '", address, "' is not host:port (port 0..65535) or unix:PATH"));
  }
  return absl::OkStatus();
}

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

}  // namespace

absl::StatusOr<std::unique_ptr<TensorServer>> TensorServer::Start(const ServerOptions& options) {
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
    if (absl::Status status = CheckPlaintextListener(address, options.tls.enabled(),
                                                     options.allow_insecure_remote);
        !status.ok()) {
      return status;
    }
  }

  std::unique_ptr<TensorServer> server(new TensorServer());
  server->metrics_ = std::make_unique<ServiceMetrics>();
  server->registry_ = std::make_unique<Registry>(options.registry);
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
  server->service_ = std::make_unique<TensorService>(*server->registry_, *server->tokens_, options,
                                                     *server->metrics_, server->snapshots_.get());
  if (!options.handoff.socket_path.empty()) {
    absl::StatusOr<std::unique_ptr<HandoffServer>> handoff = HandoffServer::Start(
        options.handoff, *server->registry_, *server->tokens_, *server->metrics_);
    if (!handoff.ok()) return handoff.status();
    server->handoff_ = std::move(*handoff);
  }

  grpc::EnableDefaultHealthCheckService(true);
  // Reflection lets grpcurl-style tools discover the services.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  std::vector<int> ports(options.listen_addresses.size(), 0);
  const std::shared_ptr<grpc::ServerCredentials> tcp_credentials = TcpCredentials(options.tls);
  for (size_t i = 0; i < options.listen_addresses.size(); ++i) {
    const std::string& address = options.listen_addresses[i];
    builder.AddListeningPort(address,
                             absl::StartsWith(address, "unix:") ? grpc::InsecureServerCredentials()
                                                                : tcp_credentials,
                             &ports[i]);
  }
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
  for (size_t i = 0; i < options.listen_addresses.size(); ++i) {
    const std::string& address = options.listen_addresses[i];
    if (ports[i] == 0) {
      server->server_->Shutdown();
      return absl::UnavailableError(absl::StrCat("could not bind listen address '", address, "'"));
    }
    if (absl::StartsWith(address, "unix:")) {
      server->bound_addresses_.push_back(address);
    } else {
      server->bound_addresses_.push_back(
          absl::StrCat(address.substr(0, address.rfind(':')), ":", ports[i]));
    }
  }
  return server;
}

TensorServer::~TensorServer() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
  handoff_.reset();  // ends local leases before the registry goes
}

void TensorServer::Shutdown(absl::Duration grace) {
  const absl::Time deadline = absl::Now() + grace;
  const bool fetches_in_flight = service_->live_payloads() > 0;
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
  absl::SleepFor(std::min(absl::Seconds(2), std::max(deadline - absl::Now(), absl::ZeroDuration())));
}

void TensorServer::Wait() {
  server_->Wait();
  // Local producers stop too, so nothing publishes after Wait returns: the
  // shutdown snapshot then holds every acknowledged durable put and seal.
  if (handoff_ != nullptr) handoff_->Stop();
}

}  // namespace tensord
