#include "service/cluster/peer_channels.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/common/errno_safe_connects.h"
#include "service/wire/channel_arg_milliseconds.h"

namespace tensord {
namespace {

int64_t NowNanos() { return absl::GetCurrentTimeNanos(); }

// How often the watchdog looks: a tenth of the stall timeout, within bounds.
absl::Duration WatchdogPeriod(absl::Duration stall) {
  return std::clamp(stall / 10, absl::Milliseconds(10), absl::Milliseconds(250));
}

}  // namespace

absl::Duration PeerIdleTimeout(absl::Duration server_idle_timeout) {
  if (server_idle_timeout <= absl::ZeroDuration()) return absl::InfiniteDuration();
  return std::max(absl::Seconds(1), server_idle_timeout * 2 / 5);
}

PeerChannels::PeerChannels(PeerChannelOptions options) : options_(std::move(options)) {
  watchdog_ = std::thread([this] { WatchdogLoop(); });
}

PeerChannels::~PeerChannels() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    stop_.SignalAll();
  }
  watchdog_.join();
}

std::shared_ptr<grpc::Channel> PeerChannels::ChannelTo(const std::string& address) {
  MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[address];
  if (channel == nullptr) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(options_.max_message_bytes);
    arguments.SetMaxSendMessageSize(options_.max_message_bytes);
    arguments.SetInt(GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS,
                     ChannelArgMilliseconds(options_.idle_timeout));
    // A peer that went away is noticed on an idle connection too, at the
    // rate the nodes' servers accept pings (every 10 s without data).
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2'000);
    // A peer that was down is tried again within a second, not after
    // gRPC's backoff of up to two minutes.
    arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // No transparent retries: a call is this node's to place elsewhere.
    arguments.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (!options_.peer_ca_pem.empty()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = options_.peer_ca_pem;
      ssl.pem_cert_chain = options_.client_cert_pem;
      ssl.pem_private_key = options_.client_key_pem;
      credentials = grpc::SslCredentials(ssl);
      if (!options_.peer_tls_server_name.empty()) {
        arguments.SetSslTargetNameOverride(options_.peer_tls_server_name);
      }
    }
    MakeGrpcConnectsErrnoSafe();
    channel = grpc::CreateCustomChannel(address, credentials, arguments);
  }
  return channel;
}

void PeerChannels::Prepare(grpc::ClientContext& context, absl::Duration timeout) const {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  // Never in plaintext: the config refuses a token without a cluster CA,
  // and this checks it again where the token leaves.
  if (!options_.bearer_token.empty() && !options_.peer_ca_pem.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.bearer_token));
  }
}

PeerChannels::StallGuard::StallGuard(PeerChannels& owner, grpc::ClientContext* context)
    : owner_(owner), context_(context), last_moved_nanos_(NowNanos()) {}

PeerChannels::StallGuard::~StallGuard() {
  MutexLock lock(&owner_.mu_);
  owner_.guards_.erase(this);
}

void PeerChannels::StallGuard::Moved() {
  last_moved_nanos_.store(NowNanos(), std::memory_order_relaxed);
}

std::unique_ptr<PeerChannels::StallGuard> PeerChannels::GuardStall(grpc::ClientContext& context) {
  std::unique_ptr<StallGuard> guard(new StallGuard(*this, &context));
  MutexLock lock(&mu_);
  if (stopping_) {
    context.TryCancel();
    guard->stalled_.store(true, std::memory_order_release);
  }
  guards_.emplace(guard.get(), true);
  return guard;
}

void PeerChannels::CancelAll() {
  MutexLock lock(&mu_);
  for (auto& [guard, unused] : guards_) guard->context_->TryCancel();
}

void PeerChannels::WatchdogLoop() {
  const int64_t stall_nanos = absl::ToInt64Nanoseconds(options_.stall_timeout);
  MutexLock lock(&mu_);
  while (!stopping_) {
    stop_.WaitWithTimeout(&mu_, WatchdogPeriod(options_.stall_timeout));
    const int64_t now = NowNanos();
    for (auto& [guard, unused] : guards_) {
      if (guard->stalled_.load(std::memory_order_relaxed)) continue;
      if (now - guard->last_moved_nanos_.load(std::memory_order_relaxed) > stall_nanos) {
        guard->stalled_.store(true, std::memory_order_release);
        guard->context_->TryCancel();
      }
    }
  }
}

}  // namespace tensord
