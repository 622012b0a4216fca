// libFuzzer target: HandoffSession::Handle, the parser and dispatcher of the
// packets a local client sends on the handoff socket. Each input is one
// connection: a fresh registry with small limits, a session, and a sequence
// of packets handled in order.
//
// A put_many packet is handed a memfd holding the input up to its end
// (sealed against shrinking for an even request id), so its checks and
// copies run against real, sometimes unsealed, files.
//
// Input: [flags] then packets, each [2-byte little-endian length][bytes]
// (a length past the end takes what is left). flags bit 0: the peer is on the
// allow-list (authorized); bit 1: reap expired creates after every packet;
// bits 2..7: seconds the clock advances per packet.
// An AuthenticateRequest whose token is "fuzz-token" is sent with a token
// really issued for this connection, so the success path is reachable.
//
// Beyond "no crash": every reply parses as a HandoffResponse echoing the
// request id; an error carries a canonical code, a message, no kind and no
// fd; an fd goes out exactly with a new lease or create and is a memfd of
// mapping_bytes (sealed for a lease). When the session ends, every byte it
// held is returned to the registry, and once the registry goes too, every
// memfd is closed.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "google/protobuf/stubs/logging.h"
#include "service/common/fd_limits.h"
#include "service/common/log.h"
#include "service/registry/registry.h"
#include "service/transport/handoff_session.h"
#include "service/transport/handoff_tokens.h"
#include "service/wire/handoff_batch_answer.h"
#include "service/wire/wire_tensor_info.h"
#include "tensord/v1/handoff.pb.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr size_t kMaxPackets = 64;
constexpr uint64_t kMaxHostBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxTensors = 16;

uint64_t FdSize(int fd) {
  struct stat st;
  Check(::fstat(fd, &st) == 0);
  return static_cast<uint64_t>(st.st_size);
}

void CheckReply(const tensord::v1::HandoffRequest* request,
                const tensord::HandoffSession::Reply& reply, const tensord::Registry& registry) {
  using namespace tensord;
  v1::HandoffResponse response;
  Check(response.ParseFromString(reply.bytes));
  Check(response.code() >= 0 && response.code() <= 16);
  if (request != nullptr) Check(response.request_id() == request->request_id());
  if (response.code() != 0) {
    Check(!response.message().empty());
    Check(response.kind_case() == v1::HandoffResponse::KIND_NOT_SET);
    Check(reply.fd() == -1);
    return;
  }
  Check(request != nullptr);
  Check(registry.host_bytes_used() <= registry.host_bytes_limit());
  switch (request->kind_case()) {
    case v1::HandoffRequest::kAcquire: {
      Check(response.has_acquire());
      const v1::TensorInfo& info = response.acquire().info();
      Check(info.name() == request->acquire().name());
      if (request->acquire().version() != 0) Check(info.version() == request->acquire().version());
      if (response.acquire().lease_id() == 0) {
        Check(reply.fd() == -1);  // the client already holds this version
      } else if (response.acquire().arena_id() != 0) {
        // A slot of a shared arena, only for a client that accepts them:
        // the mapping is the arena, the version's bytes inside it, and the
        // arena is sealed against growing, shrinking and new writers.
        Check(request->acquire().accepts_arena_slots());
        Check(response.acquire().mapping_offset() <= response.acquire().mapping_bytes() &&
              info.total_bytes() <=
                  response.acquire().mapping_bytes() - response.acquire().mapping_offset());
        Check(reply.fd() >= 0 && FdSize(reply.fd()) == response.acquire().mapping_bytes());
        const int seals = ::fcntl(reply.fd(), F_GET_SEALS);
        Check(seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE)) ==
                                (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE));
      } else {
        // A memfd of its own, normal pages (the registry's default): the
        // mapping is the tensor.
        Check(response.acquire().mapping_offset() == 0);
        Check(response.acquire().mapping_bytes() == info.total_bytes());
        Check(reply.fd() >= 0 && FdSize(reply.fd()) == response.acquire().mapping_bytes());
        const int seals = ::fcntl(reply.fd(), F_GET_SEALS);
        Check(seals >= 0 && (seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)) ==
                                (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW));
      }
      break;
    }
    case v1::HandoffRequest::kCreate:
      Check(response.has_create() && response.create().create_id() != 0);
      Check(response.create().mapping_bytes() == request->create().total_bytes());
      Check(reply.fd() >= 0 && FdSize(reply.fd()) == response.create().mapping_bytes());
      Check(request->create().total_bytes() <= registry.host_bytes_used());
      break;
    case v1::HandoffRequest::kSeal:
      Check(response.has_seal() && reply.fd() == -1);
      Check(response.seal().info().version() != 0);
      break;
    case v1::HandoffRequest::kAcquireMany:
    case v1::HandoffRequest::kAcquireMore: {
      // One packet of a batch answer: within the packet limits, one fd per
      // item that says it has one, each a sealed memfd.
      Check(response.has_acquire_many());
      Check(reply.bytes.size() <= kMaxBatchPacketBytes);
      {  // the client's hand parser reads the hand-framed answer whole
        WireBatchAnswer parsed;
        WireAcquiredItem item;
        Check(ParseWireBatchAnswer(
            {reinterpret_cast<const uint8_t*>(reply.bytes.data()), reply.bytes.size()}, parsed));
        Check(parsed.items.size() == static_cast<size_t>(response.acquire_many().items_size()));
        for (std::span<const uint8_t> bytes : parsed.items) {
          Check(ParseWireAcquiredItem(bytes, kAcquiredItemNesting, item));
        }
      }
      Check(reply.fds.size() <= kMaxFdsPerPacket);
      size_t attached = 0;
      for (const v1::AcquiredItem& item : response.acquire_many().items()) {
        if (item.status().code() != 0) {
          Check(!item.fd_attached() && !item.has_acquire());
          continue;
        }
        Check(item.acquire().lease_id() != 0);
        if (item.fd_attached()) {
          Check(attached < reply.fds.size());
          const int fd = reply.fds[attached++];
          Check(FdSize(fd) >= item.acquire().mapping_bytes());
          Check((::fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK) != 0);
        }
      }
      Check(attached == reply.fds.size());
      break;
    }
    case v1::HandoffRequest::kSealGroup:
      Check(response.has_seal_group() && reply.fd() == -1);
      Check(response.seal_group().infos_size() == request->seal_group().seals_size());
      for (const v1::TensorInfo& info : response.seal_group().infos()) {
        Check(info.version() == response.seal_group().infos(0).version());
      }
      break;
    case v1::HandoffRequest::kPutMany: {
      // One result per item, in the packet limit; a published item's
      // version exists, an atomic batch's all under one.
      Check(response.has_put_many() && reply.fd() == -1);
      Check(reply.bytes.size() <= kMaxBatchPacketBytes);
      Check(response.put_many().results_size() == request->put_many().items_size());
      for (const v1::PutManyResult& result : response.put_many().results()) {
        if (result.status().code() != 0) continue;
        Check(result.version() != 0);
        if (request->put_many().atomic()) {
          Check(result.version() == response.put_many().group_version());
        }
      }
      break;
    }
    case v1::HandoffRequest::kRelease:
    case v1::HandoffRequest::kAbort:
    case v1::HandoffRequest::kAuthenticate:
      Check(response.kind_case() == v1::HandoffResponse::KIND_NOT_SET && reply.fd() == -1);
      break;
    default: Check(false);  // an unknown kind is never OK
  }
}

// One connection: the packets of `data` (after the flags byte) handled in
// order by a session on a fresh registry, then the session closed.
void Connection(const uint8_t* data, size_t size, bool authorized, bool reap, absl::Duration tick) {
  using namespace tensord;
  Registry registry(RegistryOptions{.max_host_bytes = kMaxHostBytes, .max_tensors = kMaxTensors});
  HandoffTokens tokens(absl::Seconds(30), 4);
  absl::StatusOr<HandoffTokens::Issued> issued = tokens.Issue();
  Check(issued.ok());
  HandoffLimits limits;
  limits.max_tensor_bytes = 64 * 1024;
  limits.max_leases_per_connection = 8;
  limits.create_timeout = absl::Seconds(5);
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  ServiceMetrics metrics;

  {
    HandoffSession session(registry, tokens, limits, PeerCredentials{.pid = 1, .uid = 2, .gid = 3},
                           authorized, metrics);
    size_t at = 1;
    for (size_t packets = 0; at < size && packets < kMaxPackets; ++packets) {
      size_t length = data[at];
      if (at + 1 < size) length |= size_t{data[at + 1]} << 8;
      at = std::min(at + 2, size);
      length = std::min(length, size - at);
      std::string packet(reinterpret_cast<const char*>(data + at), length);
      at += length;

      v1::HandoffRequest request;
      const bool parsed = request.ParseFromString(packet);
      if (parsed && request.has_authenticate() && request.authenticate().token() == "fuzz-token") {
        request.mutable_authenticate()->set_token(issued->token);
        packet = request.SerializeAsString();
      }
      // A put_many comes with a memfd of the packets' bytes so far: sealed
      // against shrinking for an even request id, not sealed for an odd one.
      ScopedFd memfd;
      if (parsed && request.has_put_many()) {
        memfd.Reset(::memfd_create("fuzz-put-many", MFD_CLOEXEC | MFD_ALLOW_SEALING));
        Check(memfd.valid());
        Check(::write(memfd.get(), data, at) == static_cast<ssize_t>(at));
        if (request.request_id() % 2 == 0)
          Check(::fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK) == 0);
      }
      std::optional<HandoffSession::Reply> answered =
          session.Handle(packet, std::move(memfd), now, nullptr);
      Check(answered.has_value());
      HandoffSession::Reply reply = *std::move(answered);
      CheckReply(parsed ? &request : nullptr, reply, registry);
      Check(session.lease_count() <= limits.max_leases_per_connection);
      Check(registry.tensor_count() <= kMaxTensors);

      now += tick;
      if (reap) session.ReapExpiredCreates(now);
    }
  }

  // The session is gone: its leases and creates gave their bytes back, so
  // only the latest published versions still count.
  absl::StatusOr<ListPage> page = registry.List("", 1000, "");
  Check(page.ok() && page->next_page_token.empty());
  uint64_t published = 0;
  for (const VersionInfo& info : page->tensors) {
    Check(info.open_leases == 0);
    published += info.total_bytes;
  }
  Check(registry.host_bytes_used() == published);
}

}  // namespace

// Quiet the seal log lines, and protobuf's complaint about every string field
// with invalid UTF-8 it rejects: at thousands of inputs a second, only noise.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  tensord::SetMinLogLevel(tensord::LogLevel::kError);
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const uint64_t fds_before = tensord::OpenFileCount();
  Check(fds_before > 0);  // 0: /proc/self/fd unreadable
  Connection(data, size, flags & 1, flags & 2, absl::Seconds(flags >> 2));
  // Every memfd went away with its lease, create or version.
  Check(tensord::OpenFileCount() == fds_before);
  return 0;
}
