// LocalTransport::BatchPut: the items written into a memfd of this
// process's (PutStaging) and handed to the server with one put_many
// request, which copies and publishes them.
// One round trip per request instead of a gRPC stream's framing, copies
// and loopback TCP.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/src/batch_request_wire.h"
#include "client/src/call_cancellation.h"
#include "client/src/call_routing.h"
#include "client/src/info_conversion.h"
#include "client/src/local_transport.h"
#include "service/common/crc32c.h"
#include "service/common/errno_status.h"
#include "service/common/scoped_fd.h"
#include "service/common/status_macros.h"
#include "service/common/unix_socket.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/strided_copy.h"
#include "service/wire/batch_limits.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

// Items start on this boundary in the memfd (a cache line: whole-line
// copies on both sides).
constexpr uint64_t kItemAlignment = 64;
// Room a request keeps in its packet for everything but the items.
constexpr size_t kPacketSlack = 1024;
// Items per request of a batch that is not atomic: several requests, two in
// flight, so the client writes one request's items into the staging memfd
// while the server copies and publishes the one before.
constexpr size_t kPipelinedRequestItems = 256;
constexpr size_t kFirstPipelinedRequestItems = 64;

uint64_t AlignUp(uint64_t value) { return (value + kItemAlignment - 1) & ~(kItemAlignment - 1); }

// One item as the request describes it, and where its bytes come from.
struct PlannedItem {
  const BatchPutItem* item = nullptr;
  dlpack::TensorLayout source;
  // What the server stores: the source's dtype and shape, compact, on the host.
  dlpack::TensorLayout compact;
  uint64_t total_bytes = 0;
  // In its request's range of the staging memfd.
  uint64_t offset = 0;
  std::optional<uint32_t> crc32c;

  // The item as the request frames it, its bytes at `base` + offset.
  PutManyItemWire Wire(uint64_t base) const {
    PutManyItemWire wire;
    wire.name = item->name;
    wire.layout = &compact;
    wire.total_bytes = total_bytes;
    wire.retention = static_cast<int32_t>(item->retention);
    wire.crc32c = crc32c;
    wire.offset = base + offset;
    return wire;
  }
  // What the item adds to a request at most, wherever its request lies in
  // the memfd: counted at an offset past any a request has (see
  // kOffsetsBelow).
  size_t MostWireBytes() const;
};

// Every offset a request carries is below this: a request's items take at
// most kMaxPutManyBytes and their alignment, and requests that share a
// staging memfd (kMaxKeptStagingBytes, below) take no more in all.
constexpr uint64_t kOffsetsBelow = kMaxPutManyBytes + kMaxPutManyItems * kItemAlignment;

size_t PlannedItem::MostWireBytes() const {
  PutManyItemWire wire = Wire(0);
  wire.offset = kOffsetsBelow;
  return PutManyItemSize(wire);
}

// The largest staging memfd a connection keeps between batch puts; a
// request beyond it writes into one of its own, closed after.
constexpr uint64_t kMaxKeptStagingBytes = uint64_t{64} << 20;
// Staging sizes are rounded up to this, so batches of about one size reuse
// one memfd.
constexpr uint64_t kStagingGranule = uint64_t{1} << 20;
static_assert(kMaxKeptStagingBytes <= kMaxPutManyBytes, "kOffsetsBelow bounds shared offsets");

}  // namespace

// A memfd this process writes batch puts into and the server copies them
// out of. Sealed against shrinking only, so a server mapping never runs
// past its end (SIGBUS); it may still be written, which harms nobody but
// its writer: the server sums the bytes of its own copy. Mapped once here
// and reused by every batch put of the connection, its pages allocated
// once: a memfd per batch, populated, sealed and freed each time, cost
// more than the gRPC stream it replaces.
class PutStaging {
 public:
  static absl::StatusOr<std::unique_ptr<PutStaging>> Make(uint64_t size) {
    size =
        std::max<uint64_t>(kStagingGranule, (size + kStagingGranule - 1) & ~(kStagingGranule - 1));
    ScopedFd fd(::memfd_create("tensord:put_many", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd.valid()) return ErrnoStatus(errno, "memfd_create for a local batch put");
    if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
      return ErrnoStatus(errno, absl::StrCat("ftruncate of a local batch put's ", size, " bytes"));
    }
    if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
      return ErrnoStatus(errno, "sealing a local batch put's memfd against shrinking");
    }
    // Populated in one call rather than one write fault per page.
    void* data =
        ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd.get(), 0);
    if (data == MAP_FAILED) {
      return MappingErrnoStatus(errno,
                                absl::StrCat("mmap of a local batch put's ", size, " bytes"));
    }
    return std::unique_ptr<PutStaging>(
        new PutStaging(std::move(fd), static_cast<uint8_t*>(data), size));
  }
  ~PutStaging() { ::munmap(data_, size_); }
  PutStaging(const PutStaging&) = delete;
  PutStaging& operator=(const PutStaging&) = delete;

  int fd() const { return fd_.get(); }
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  PutStaging(ScopedFd fd, uint8_t* data, uint64_t size)
      : fd_(std::move(fd)), data_(data), size_(size) {}
  ScopedFd fd_;
  uint8_t* data_;
  uint64_t size_;
};

LocalTransport::LocalTransport(std::shared_ptr<HandoffConnection> connection)
    : connection_(std::move(connection)) {}
LocalTransport::~LocalTransport() = default;

namespace {

// One handoff request of a batch: items [first, end), and the bytes of
// its memfd.
struct Request {
  size_t first = 0;
  size_t end = 0;
  uint64_t memfd_bytes = 0;
};

// Each item's compact layout and size, as the request will describe it.
absl::StatusOr<std::vector<PlannedItem>> PlanItems(std::span<const BatchPutItem> items) {
  std::vector<PlannedItem> planned(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    PlannedItem& item = planned[i];
    item.item = &items[i];
    TENSORD_ASSIGN_OR_RETURN(item.source, dlpack::LayoutOf(items[i].tensor));
    item.compact.dtype = item.source.dtype;
    item.compact.shape = item.source.shape;
    TENSORD_ASSIGN_OR_RETURN(item.total_bytes,
                             dlpack::CompactByteSize(item.compact.dtype, item.compact.shape));
  }
  return planned;
}

// Requests of as many items as one packet, kMaxPutManyItems and
// kMaxPutManyBytes allow, each item's place in the memfd set as it is
// counted (so the packet size is exact). An atomic batch is one request or
// none; what the handoff cannot carry is use_remote, before anything is
// sent.
absl::StatusOr<std::vector<Request>> SplitIntoRequests(std::vector<PlannedItem>& planned,
                                                       const BatchPutOptions& options) {
  // An atomic batch must fit one request; another is cut smaller, so that
  // its requests can be pipelined.
  std::vector<Request> requests;
  for (size_t first = 0; first < planned.size() || (first == 0 && planned.empty());) {
    // The first is smaller, so that the server has work sooner.
    const size_t max_items = options.atomic     ? kMaxPutManyItems
                             : requests.empty() ? kFirstPipelinedRequestItems
                                                : kPipelinedRequestItems;
    Request request{.first = first, .end = first};
    size_t packet_bytes = kPacketSlack;
    uint64_t data_bytes = 0;
    while (request.end < planned.size() && request.end - first < max_items) {
      PlannedItem& item = planned[request.end];
      const uint64_t size = item.total_bytes;
      item.offset = request.memfd_bytes;
      // The checksum's largest room, filled in once the bytes are written.
      if (options.send_crc32c) item.crc32c = ~uint32_t{0};
      const size_t item_bytes = item.MostWireBytes();
      const bool fits = packet_bytes + item_bytes <= kMaxBatchPacketBytes &&
                        data_bytes + size <= kMaxPutManyBytes;
      if (!fits) break;
      packet_bytes += item_bytes;
      data_bytes += size;
      request.memfd_bytes = AlignUp(request.memfd_bytes + size);
      ++request.end;
    }
    if (request.end == first && !planned.empty()) {
      return MarkUseRemote(absl::FailedPreconditionError(
          absl::StrCat("batch put item ", first, " ('", planned[first].item->name, "') of ",
                       planned[first].total_bytes, " bytes exceeds a local batch put request's ",
                       kMaxPutManyBytes, " bytes; it goes over gRPC")));
    }
    requests.push_back(request);
    if (planned.empty()) break;
    first = request.end;
  }
  if (options.atomic && requests.size() > 1) {
    return MarkUseRemote(absl::FailedPreconditionError(absl::StrCat(
        "an atomic batch of ", planned.size(), " items does not fit one local batch put request (",
        kMaxPutManyItems, " items, ", kMaxPutManyBytes, " bytes, a ", kMaxBatchPacketBytes,
        "-byte packet); it goes over gRPC")));
  }
  return requests;
}

// The request's items, compacted, into `staging` at their offsets from
// `base` (and their checksums when asked).
absl::Status WriteItems(const PutStaging& staging, uint64_t base, std::vector<PlannedItem>& planned,
                        const Request& request, bool send_crc32c) {
  for (size_t i = request.first; i < request.end; ++i) {
    PlannedItem& item = planned[i];
    uint8_t* target = staging.data() + base + item.offset;
    if (item.total_bytes > 0) {
      TENSORD_RETURN_IF_ERROR(
          dlpack::CopyStrided(item.item->tensor.data, item.source, target, item.compact));
    }
    if (send_crc32c) item.crc32c = Crc32c(target, item.total_bytes);
  }
  return absl::OkStatus();
}

// The request's answer, one result per item, in its items' places in
// `result`.
absl::Status PlaceResults(const v1::PutManyResponse& answer,
                          const std::vector<PlannedItem>& planned, const Request& request,
                          BatchPutResult& result) {
  if (static_cast<size_t>(answer.results_size()) != request.end - request.first) {
    return absl::InternalError(absl::StrCat("server answered ", answer.results_size(),
                                            " batch put results for ", request.end - request.first,
                                            " items"));
  }
  result.group_version = answer.group_version();
  for (size_t i = request.first; i < request.end; ++i) {
    const v1::PutManyResult& item = answer.results(static_cast<int>(i - request.first));
    if (item.status().code() != 0) {
      result.items[i] = absl::Status(static_cast<absl::StatusCode>(item.status().code()),
                                     item.status().message());
      continue;
    }
    const PlannedItem& sent = planned[i];
    result.items[i] = InfoOfPut(sent.item->name, sent.compact, sent.total_bytes,
                                static_cast<int32_t>(sent.item->retention), item.version(),
                                item.crc32c(), item.created_unix_nanos());
  }
  return absl::OkStatus();
}

// After `failure`: when no request was answered and none may have been
// published, the call fails with it (and kAuto may take gRPC). Otherwise
// answered items are published, so the call answers them, and this
// failure on every item not answered: failing the call would hide them,
// and a retry over gRPC would publish them twice.
absl::Status AnswerUnansweredItems(const absl::Status& failure,
                                   const std::vector<Request>& requests,
                                   const std::vector<bool>& answered, bool outcome_unknown,
                                   BatchPutResult& result) {
  const bool none_answered = std::find(answered.begin(), answered.end(), true) == answered.end();
  if (none_answered && !outcome_unknown) return failure;
  const absl::Status not_sent(failure.code(),
                              absl::StrCat("not known to be published: the local batch put request "
                                           "carrying it failed: ",
                                           failure.message()));
  for (size_t index = 0; index < requests.size(); ++index) {
    if (answered[index]) continue;
    for (size_t i = requests[index].first; i < requests[index].end; ++i) {
      result.items[i] = not_sent;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BatchPutResult> LocalTransport::BatchPut(std::span<const BatchPutItem> items,
                                                        const BatchPutOptions& options,
                                                        const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(CheckNotCancelled(call, "batch put"));
  TENSORD_ASSIGN_OR_RETURN(std::vector<PlannedItem> planned, PlanItems(items));
  TENSORD_ASSIGN_OR_RETURN(std::vector<Request> requests, SplitIntoRequests(planned, options));
  BatchPutResult result;
  result.items.assign(items.size(), absl::InternalError("not answered"));
  std::vector<bool> answered(requests.size(), false);
  absl::Status failure;  // the first request's that failed
  // Request `index`: its items written into `staging` from `base`, and
  // described at those offsets.
  std::vector<PutManyItemWire> wire_items;
  auto fill = [&](size_t index, const PutStaging& staging, uint64_t base,
                  std::string& put_many_field) -> absl::Status {
    TENSORD_RETURN_IF_ERROR(CheckNotCancelled(call, "batch put"));
    const Request& request = requests[index];
    TENSORD_RETURN_IF_ERROR(WriteItems(staging, base, planned, request, options.send_crc32c));
    wire_items.clear();
    for (size_t i = request.first; i < request.end; ++i) {
      wire_items.push_back(planned[i].Wire(base));
    }
    AppendPutManyField(wire_items, options.atomic, put_many_field);
    return absl::OkStatus();
  };
  // A request reached the server and no answer says what became of it.
  bool outcome_unknown = false;
  // The socket failed: the server may still be reading the staging memfd.
  bool transport_failed = false;
  // Whether to go on after request `index`'s answer.
  auto take_answer = [&](size_t index, bool delivered,
                         absl::StatusOr<HandoffConnection::Response> answer) -> bool {
    absl::Status placed = answer.status();
    if (placed.ok()) {
      placed = PlaceResults(answer->message->put_many(), planned, requests[index], result);
    }
    if (!placed.ok()) {
      if (failure.ok()) failure = placed;
      // The server's own answer (a refusal, or use_remote: the gRPC path
      // takes it) says nothing was published; a socket error says nothing.
      const bool server_answered = IsServerAnswer(answer.status()) || IsUseRemote(answer.status());
      if (!server_answered && !answer.ok()) transport_failed = true;
      if (delivered && !server_answered) outcome_unknown = true;
      return false;
    }
    answered[index] = true;
    return true;
  };
  {
    // One batch at a time fills and sends the staging memfd.
    MutexLock lock(&put_mutex_);
    uint64_t total_bytes = 0;
    std::vector<uint64_t> bases;
    for (const Request& request : requests) {
      bases.push_back(total_bytes);
      total_bytes += request.memfd_bytes;
    }
    if (requests.size() > 1 && total_bytes <= kMaxKeptStagingBytes) {
      // Every request's items at their own place in the staging memfd, so
      // one can be written while the server reads the one before.
      TENSORD_RETURN_IF_ERROR(EnsureStagingLocked(total_bytes));
      const PutStaging& staging = *put_staging_;  // put_mutex_ is held throughout
      connection_->CallPipelined(
          requests.size(), staging.fd(),
          [&](size_t index, v1::HandoffRequest&, std::string& put_many_field) {
            return fill(index, staging, bases[index], put_many_field);
          },
          take_answer);
    } else {
      for (size_t index = 0; index < requests.size() && failure.ok(); ++index) {
        // This connection's staging memfd, or one of this request's own.
        std::unique_ptr<PutStaging> own_staging;
        if (requests[index].memfd_bytes > kMaxKeptStagingBytes) {
          absl::StatusOr<std::unique_ptr<PutStaging>> made =
              PutStaging::Make(requests[index].memfd_bytes);
          if (!made.ok()) {
            failure = made.status();
            break;
          }
          own_staging = *std::move(made);
        } else if (absl::Status kept = EnsureStagingLocked(requests[index].memfd_bytes);
                   !kept.ok()) {
          failure = kept;
          break;
        }
        const PutStaging& staging = own_staging != nullptr ? *own_staging : *put_staging_;
        connection_->CallPipelined(
            1, staging.fd(),
            [&](size_t, v1::HandoffRequest&, std::string& put_many_field) {
              return fill(index, staging, 0, put_many_field);
            },
            [&](size_t, bool delivered, absl::StatusOr<HandoffConnection::Response> answer) {
              return take_answer(index, delivered, std::move(answer));
            });
      }
    }
    // The server may still copy out of the memfd a request it got before
    // the socket failed: the next batch writes into a new one.
    if (transport_failed) put_staging_.reset();
  }
  if (!failure.ok()) {
    TENSORD_RETURN_IF_ERROR(
        AnswerUnansweredItems(failure, requests, answered, outcome_unknown, result));
  }
  // Called once, with no lock held, so a callback may call this client again.
  if (options.progress) options.progress(items.size(), items.size());
  return result;
}

absl::Status LocalTransport::EnsureStagingLocked(uint64_t bytes) {
  if (put_staging_ != nullptr && put_staging_->size() >= bytes) return absl::OkStatus();
  put_staging_.reset();  // its pages go before the larger one's come
  TENSORD_ASSIGN_OR_RETURN(put_staging_, PutStaging::Make(bytes));
  return absl::OkStatus();
}

}  // namespace tensord
