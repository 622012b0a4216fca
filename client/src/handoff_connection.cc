#include "client/src/handoff_connection.h"

#include "client/src/call_routing.h"

#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/common/unix_socket.h"
#include "service/wire/batch_limits.h"
#include "service/wire/status_conversion.h"

namespace tensord {

absl::StatusOr<std::shared_ptr<HandoffConnection>> HandoffConnection::Connect(
    const std::string& path, TokenSource token_source) {
  absl::StatusOr<ScopedFd> socket = ConnectSeqpacket(path);
  if (!socket.ok()) return socket.status();
  absl::StatusOr<PeerCredentials> server = GetPeerCredentials(socket->get());
  if (!server.ok()) return server.status();
  return std::shared_ptr<HandoffConnection>(new HandoffConnection(
      path, absl::StrCat(path, " pid ", server->pid), std::move(*socket), std::move(token_source)));
}

absl::Status HandoffConnection::SendLocked(v1::HandoffRequest& request, int fd,
                                           bool close_on_failure,
                                           absl::string_view appended_fields) {
  if (!socket_.valid())
    return absl::UnavailableError(absl::StrCat("handoff socket ", path_, " is closed"));
  request.set_request_id(next_request_id_++);
  std::string packet = request.SerializeAsString();
  packet.append(appended_fields.data(), appended_fields.size());
  absl::Status sent = SendPacket(socket_.get(), packet, fd);
  if (!sent.ok()) {
    if (close_on_failure) socket_.Reset();
    return absl::UnavailableError(absl::StrCat("handoff socket ", path_, ": ", sent.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ReceivedPacket> HandoffConnection::ReceiveLocked(bool batch) {
  if (!socket_.valid())
    return absl::UnavailableError(absl::StrCat("handoff socket ", path_, " is closed"));
  // A batch answer's packets are larger and carry many fds.
  absl::StatusOr<ReceivedPacket> packet =
      batch ? ReceivePacket(socket_.get(), kMaxBatchPacketBytes, kMaxFdsPerPacket)
            : ReceivePacket(socket_.get());
  if (!packet.ok()) {
    socket_.Reset();
    return absl::UnavailableError(
        absl::StrCat("handoff socket ", path_, ": ", packet.status().message()));
  }
  return packet;
}

absl::StatusOr<HandoffConnection::Response> HandoffConnection::CallLocked(
    v1::HandoffRequest& request, int fd) {
  bool delivered = false;
  return DeliverLocked(request, fd, delivered);
}

absl::StatusOr<HandoffConnection::Response> HandoffConnection::DeliverLocked(
    v1::HandoffRequest& request, int fd, bool& delivered, absl::string_view appended_fields) {
  TENSORD_RETURN_IF_ERROR(SendLocked(request, fd, /*close_on_failure=*/true, appended_fields));
  delivered = true;
  // A put_many answer is as large as a batch answer's; fields framed by
  // hand are a batch's (put_many's).
  const bool batch =
      request.kind_case() == v1::HandoffRequest::kPutMany || !appended_fields.empty();
  TENSORD_ASSIGN_OR_RETURN(ReceivedPacket packet, ReceiveLocked(batch));
  return ParseAnswerLocked(std::move(packet), request.request_id());
}

absl::StatusOr<HandoffConnection::Response> HandoffConnection::ParseAnswerLocked(
    ReceivedPacket packet, uint64_t request_id) {
  Response response;
  response.arena = std::make_unique<google::protobuf::Arena>();
  response.message =
      google::protobuf::Arena::CreateMessage<v1::HandoffResponse>(response.arena.get());
  response.fd = std::move(packet.fd);
  response.more_fds = std::move(packet.more_fds);
  if (!response.message->ParseFromString(packet.bytes) ||
      response.message->request_id() != request_id) {
    socket_.Reset();
    return absl::InternalError(absl::StrCat("handoff socket ", path_, " sent an invalid response"));
  }
  if (response.message->code() != static_cast<int32_t>(absl::StatusCode::kPermissionDenied)) {
    credentials_accepted_ = true;
  }
  if (response.message->code() != 0) {
    absl::Status refusal(static_cast<absl::StatusCode>(response.message->code()),
                         response.message->message());
    return response.message->use_remote() ? MarkUseRemote(std::move(refusal))
                                          : MarkServerAnswer(std::move(refusal));
  }
  return response;
}

absl::Status HandoffConnection::ReceiveBatchPacketLocked(uint64_t request_id, BatchPacket& packet) {
  TENSORD_ASSIGN_OR_RETURN(ReceivedPacket received, ReceiveLocked(/*batch=*/true));
  packet.bytes = std::move(received.bytes);
  packet.fd = std::move(received.fd);
  packet.more_fds = std::move(received.more_fds);
  const auto* bytes = reinterpret_cast<const uint8_t*>(packet.bytes.data());
  if (!ParseWireBatchAnswer({bytes, packet.bytes.size()}, packet.answer) ||
      packet.answer.request_id != request_id) {
    socket_.Reset();
    return absl::InternalError(absl::StrCat("handoff socket ", path_, " sent an invalid response"));
  }
  if (packet.answer.code != 0) {
    absl::Status refusal(static_cast<absl::StatusCode>(packet.answer.code), packet.answer.message);
    return packet.answer.use_remote ? MarkUseRemote(std::move(refusal))
                                    : MarkServerAnswer(std::move(refusal));
  }
  return absl::OkStatus();
}

absl::StatusOr<HandoffConnection::Response> HandoffConnection::Call(v1::HandoffRequest request) {
  MutexLock lock(&mutex_);
  // Leases dropped before this call end before it: the server's lease
  // count never holds them against what it acquires.
  const size_t releasing = AttachReleasesLocked(request);
  absl::StatusOr<Response> response = CallAuthenticatingLocked(request);
  releaser_.Sent(releasing);
  return response;
}

absl::StatusOr<bool> HandoffConnection::AuthenticatedForRetryLocked(const absl::Status& answer) {
  if (answer.code() != absl::StatusCode::kPermissionDenied || authenticated_ || !token_source_) {
    return false;
  }
  absl::StatusOr<std::string> token = token_source_();
  if (!token.ok()) return false;  // the refusal says more than the token error
  v1::HandoffRequest authenticate;
  authenticate.mutable_authenticate()->set_token(*token);
  absl::StatusOr<Response> authenticated = CallLocked(authenticate);
  if (!authenticated.ok()) return authenticated.status();
  authenticated_ = true;
  return true;
}

absl::StatusOr<HandoffConnection::Response> HandoffConnection::CallAuthenticatingLocked(
    v1::HandoffRequest& request, int fd) {
  absl::StatusOr<Response> response = CallLocked(request, fd);
  TENSORD_ASSIGN_OR_RETURN(bool retry, AuthenticatedForRetryLocked(response.status()));
  if (!retry) return response;
  return CallLocked(request, fd);
}

absl::StatusOr<HandoffConnection::Response> HandoffConnection::CallWithFd(
    v1::HandoffRequest request, int fd) {
  MutexLock lock(&mutex_);
  const size_t releasing = AttachReleasesLocked(request);
  absl::StatusOr<Response> response = CallAuthenticatingLocked(request, fd);
  releaser_.Sent(releasing);
  return response;
}

absl::Status HandoffConnection::CallBatch(v1::HandoffRequest& request,
                                          absl::string_view appended_fields,
                                          absl::FunctionRef<absl::Status(BatchPacket&)> on_packet) {
  BatchPacket packet;
  // All under the lock: another request of this process would end the answer.
  MutexLock lock(&mutex_);
  const size_t releasing = AttachReleasesLocked(request, appended_fields.size());
  absl::Status answered = SendLocked(request, /*fd=*/-1, true, appended_fields);
  if (answered.ok()) answered = ReceiveBatchPacketLocked(request.request_id(), packet);
  absl::StatusOr<bool> retry = AuthenticatedForRetryLocked(answered);
  if (retry.ok() && *retry) {
    answered = SendLocked(request, /*fd=*/-1, true, appended_fields);
    if (answered.ok()) answered = ReceiveBatchPacketLocked(request.request_id(), packet);
  }
  releaser_.Sent(releasing);
  TENSORD_RETURN_IF_ERROR(retry.status());
  TENSORD_RETURN_IF_ERROR(answered);
  while (true) {
    v1::HandoffRequest more;
    const bool more_follows = packet.answer.more;
    if (more_follows) {
      more.mutable_acquire_more();
      TENSORD_RETURN_IF_ERROR(SendLocked(more, /*fd=*/-1));
    }
    if (absl::Status adopted = on_packet(packet); !adopted.ok()) {
      socket_.Reset();
      return adopted;
    }
    if (!more_follows) return absl::OkStatus();
    TENSORD_RETURN_IF_ERROR(ReceiveBatchPacketLocked(more.request_id(), packet));
  }
}

void HandoffConnection::CallPipelined(size_t count, int fd, FillRequest fill, OnAnswer on_answer) {
  if (count == 0) return;
  MutexLock lock(&mutex_);
  size_t next = 0;
  bool go_on = true;
  if (!credentials_accepted_) {
    // The first request alone, so that a refused credential is answered by
    // authenticating before anything else is sent.
    v1::HandoffRequest first;
    std::string first_fields;
    if (absl::Status filled = fill(0, first, first_fields); !filled.ok()) {
      on_answer(0, /*delivered=*/false, filled);
      return;
    }
    const size_t releasing = AttachReleasesLocked(first, first_fields.size());
    bool delivered = false;
    absl::StatusOr<Response> answered = DeliverLocked(first, fd, delivered, first_fields);
    absl::StatusOr<bool> retry = AuthenticatedForRetryLocked(answered.status());
    if (!retry.ok()) {
      delivered = false;          // it was refused: nothing published
      answered = retry.status();  // why it could not be sent again
    } else if (*retry) {
      delivered = false;
      answered = DeliverLocked(first, fd, delivered, first_fields);
    }
    releaser_.Sent(releasing);
    go_on = on_answer(0, delivered, std::move(answered));
    next = 1;
  }
  // Then two in flight: the next is filled and sent before this one's
  // answer is read, so the caller fills it while the server serves this.
  std::deque<std::pair<size_t, uint64_t>> in_flight;  // index, request id
  bool send_failed = false;
  while (true) {
    while (go_on && next < count && in_flight.size() < 2) {
      v1::HandoffRequest request;
      std::string fields;
      absl::Status sent = fill(next, request, fields);
      // A failed send delivered nothing (a packet goes whole or not at
      // all); the socket stays open until the answers already on their
      // way are read, so what the server did with those is known.
      if (sent.ok()) {
        sent = SendLocked(request, fd, /*close_on_failure=*/false, fields);
        send_failed = !sent.ok();
      }
      if (!sent.ok()) {
        go_on = false;
        on_answer(next, /*delivered=*/false, sent);
        break;
      }
      in_flight.emplace_back(next++, request.request_id());
    }
    if (in_flight.empty()) break;
    const auto [index, request_id] = in_flight.front();
    in_flight.pop_front();
    absl::StatusOr<ReceivedPacket> packet = ReceiveLocked(/*batch=*/true);
    absl::StatusOr<Response> answer = packet.ok()
                                          ? ParseAnswerLocked(*std::move(packet), request_id)
                                          : absl::StatusOr<Response>(packet.status());
    if (!on_answer(index, /*delivered=*/true, std::move(answer))) go_on = false;
  }
  if (send_failed) socket_.Reset();
}

size_t HandoffConnection::AttachReleasesLocked(v1::HandoffRequest& request, size_t appended_bytes) {
  // Only as many as the packet has room for: a batch request near a
  // packet's size carries few or none, and the rest go ahead on their own.
  const size_t room = ReleaseIdsThatFit(request.ByteSizeLong() + appended_bytes);
  while (true) {
    std::vector<uint64_t> lease_ids = releaser_.Take();
    if (lease_ids.size() < kMaxLeasesPerRelease && lease_ids.size() <= room) {
      request.mutable_release_lease_ids()->Add(lease_ids.begin(), lease_ids.end());
      return lease_ids.size();
    }
    // A full batch (and maybe more queued), or more than fit: sent ahead
    // in a request of its own.
    SendReleaseLocked(lease_ids);
  }
}

void HandoffConnection::SendReleasesLocked() {
  for (std::vector<uint64_t> lease_ids = releaser_.Take(); !lease_ids.empty();
       lease_ids = releaser_.Take()) {
    SendReleaseLocked(lease_ids);
  }
}

void HandoffConnection::SendReleaseLocked(std::span<const uint64_t> lease_ids) {
  v1::HandoffRequest request;
  request.mutable_release()->mutable_lease_ids()->Add(lease_ids.begin(), lease_ids.end());
  (void)CallLocked(request);
  releaser_.Sent(lease_ids.size());
}

}  // namespace tensord
