// A local batch put on the handoff socket (put_many): the client's memfd
// holds every item's bytes; each item is checked as a Put's header is,
// copied (read with pread: MemfdReader) into a buffer of the registry's
// own and published (all under one version, or none, for an atomic batch).
// The memfd is never kept: a client-made file must not become a stored
// version's memory. The client
// may still write it while it is copied; that garbles only its own put,
// since the registry sums the bytes of the server's copy, after sealing it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "service/common/errno_status.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/common/unix_socket.h"
#include "service/transport/handoff_session.h"
#include "service/transport/request_validation.h"
#include "service/wire/batch_limits.h"
#include "service/wire/layout_conversion.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

// Failure messages the answer carries before it carries codes only: the
// answer must fit one packet whatever the items say (FitOnePacket makes
// sure of it).
constexpr size_t kMessageBudget = 32 * 1024;

// A memfd that cannot shrink, so the items checked to lie inside it stay
// inside it while they are read.
absl::Status CheckCannotShrink(int fd) {
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return absl::InvalidArgumentError(
        "put_many's fd is not a memfd made with MFD_ALLOW_SEALING (F_GET_SEALS failed)");
  }
  if ((seals & F_SEAL_SHRINK) == 0) {
    return absl::InvalidArgumentError(
        "put_many's memfd lacks the seal F_SEAL_SHRINK: it could shrink while the server reads "
        "it");
  }
  return absl::OkStatus();
}

// Reads a client's memfd with pread, never a mapping: a hole reads as
// zeros without the server allocating a page for it, and a file the client
// changes meanwhile (a hole punched, a hugetlbfs page gone) is an errno
// here, never a SIGBUS or a page charged to the server. Small items go
// through a window of the session's (put_many_window_): consecutive ones,
// as a client writes them, cost one pread per window. An item of
// kDirectReadBytes or more is read straight into its version's bytes: one
// copy instead of two (into the window, then out of it), for a syscall of
// its own.
class MemfdReader {
 public:
  MemfdReader(int fd, std::vector<uint8_t>& window) : fd_(fd), window_(window) {}

  // Copies `size` bytes at `offset` of the file into `target` from its start.
  absl::Status CopyTo(uint64_t offset, uint64_t size, HostBytes& target) {
    if (size >= kDirectReadBytes) {
      absl::Status read = target.ReadFrom(fd_, offset, 0, size);
      if (!absl::IsUnimplemented(read)) return read;
    }
    uint64_t done = 0;
    while (done < size) {
      const uint64_t at = offset + done;
      if (at < window_start_ || at >= window_start_ + window_bytes_) {
        TENSORD_RETURN_IF_ERROR(Fill(at));
      }
      const uint64_t piece = std::min(size - done, window_start_ + window_bytes_ - at);
      TENSORD_RETURN_IF_ERROR(target.Write(done, window_.data() + (at - window_start_), piece));
      done += piece;
    }
    return absl::OkStatus();
  }

 private:
  static constexpr uint64_t kWindowBytes = uint64_t{1} << 20;
  // Where a pread of its own costs less than copying out of the window.
  static constexpr uint64_t kDirectReadBytes = uint64_t{16} << 10;

  absl::Status Fill(uint64_t at) {
    window_.resize(kWindowBytes);
    window_start_ = at;
    window_bytes_ = 0;
    while (window_bytes_ < kWindowBytes) {
      const ssize_t got = ::pread(fd_, window_.data() + window_bytes_, kWindowBytes - window_bytes_,
                                  static_cast<off_t>(at + window_bytes_));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return ErrnoStatus(errno, "pread of put_many's memfd");
      if (got == 0) break;  // the end of the file
      window_bytes_ += static_cast<uint64_t>(got);
    }
    if (window_bytes_ == 0) {
      return absl::InvalidArgumentError(absl::StrCat("put_many's memfd ends before offset ", at));
    }
    return absl::OkStatus();
  }

  const int fd_;
  std::vector<uint8_t>& window_;
  uint64_t window_start_ = 0;
  uint64_t window_bytes_ = 0;
};

// Drops failure messages, last first, until the answer fits one packet
// with room for the HandoffResponse around it.
void FitOnePacket(v1::PutManyResponse& response) {
  constexpr size_t kRoom = kMaxBatchPacketBytes - 256;
  size_t size = response.ByteSizeLong();
  for (int i = response.results_size() - 1; i >= 0 && size > kRoom; --i) {
    v1::ItemStatus* status = response.mutable_results(i)->mutable_status();
    if (status->message().empty()) continue;
    // Its bytes, tag and length go (the prefixes around it may shrink too,
    // so `size` stays an upper bound).
    size -= status->message().size() + 1 +
            google::protobuf::io::CodedOutputStream::VarintSize64(status->message().size());
    status->clear_message();
  }
}

// The request's own limits, before anything of it is read: item count and
// declared bytes.
absl::Status CheckRequestSize(const WirePutManyRequest& request) {
  if (request.items.size() > kMaxPutManyItems) {
    return absl::InvalidArgumentError(absl::StrCat("put_many of ", request.items.size(),
                                                   " items; one request carries at most ",
                                                   kMaxPutManyItems));
  }
  uint64_t declared = 0;
  for (const WirePutManyItem& item : request.items) {
    // Each counted as at most one byte over the limit, so the sum of 4096
    // cannot wrap past the check (the items are validated later).
    declared += std::min<uint64_t>(item.total_bytes, kMaxPutManyBytes + 1);
  }
  if (declared > kMaxPutManyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("put_many declares more than ", kMaxPutManyBytes,
                     " bytes of items; one request carries at most that much"));
  }
  return absl::OkStatus();
}

// The answer being built: one result per item, failure messages within
// kMessageBudget, and what was published.
class PutManyAnswer {
 public:
  PutManyAnswer(int items, v1::PutManyResponse& response) : response_(response) {
    for (int i = 0; i < items; ++i) response_.add_results();
  }
  void Fail(int index, const absl::Status& status) {
    v1::ItemStatus* item_status = response_.mutable_results(index)->mutable_status();
    item_status->set_code(static_cast<int32_t>(status.code()));
    if (message_bytes_ < kMessageBudget) {
      item_status->set_message(std::string(status.message()));
      message_bytes_ += status.message().size();
    }
  }
  void Published(int index, const VersionInfo& info) {
    v1::PutManyResult& result = *response_.mutable_results(index);
    result.set_version(info.version);
    result.set_crc32c(info.crc32c);
    result.set_created_unix_nanos(absl::ToUnixNanos(info.created));
    published_bytes_ += info.total_bytes;
    ++published_;
  }
  uint64_t published_bytes() const { return published_bytes_; }
  int published() const { return published_; }

 private:
  v1::PutManyResponse& response_;
  size_t message_bytes_ = 0;
  uint64_t published_bytes_ = 0;
  int published_ = 0;
};

using PrepareItem = absl::FunctionRef<absl::StatusOr<PendingVersion>(int index)>;

// Each item published on its own; a refused one fails alone.
void PublishEach(Registry& registry, const WirePutManyRequest& request, PrepareItem prepare,
                 PutManyAnswer& answer) {
  const int items = static_cast<int>(request.items.size());
  for (int i = 0; i < items; ++i) {
    absl::StatusOr<PendingVersion> pending = prepare(i);
    absl::StatusOr<VersionInfo> info =
        pending.ok() ? registry.Publish(*std::move(pending), request.items[i].crc32c)
                     : pending.status();
    if (info.ok()) {
      answer.Published(i, *info);
    } else {
      answer.Fail(i, info.status());
    }
  }
}

// All items under one version, or none: the first refusal fails every
// item, naming it. The group's version, or 0.
uint64_t PublishAtomically(Registry& registry, const WirePutManyRequest& request,
                           PrepareItem prepare, PutManyAnswer& answer) {
  const int items = static_cast<int>(request.items.size());
  std::vector<PendingVersion> group;
  std::vector<std::optional<uint32_t>> expected;
  absl::Status refused;
  for (int i = 0; i < items && refused.ok(); ++i) {
    absl::StatusOr<PendingVersion> pending = prepare(i);
    if (!pending.ok()) {
      refused = absl::Status(pending.status().code(),
                             absl::StrCat("item ", i, ": ", pending.status().message()));
      continue;
    }
    group.push_back(*std::move(pending));
    expected.push_back(request.items[i].crc32c);
  }
  absl::StatusOr<std::vector<VersionInfo>> infos =
      refused.ok() ? registry.PublishGroup(std::move(group), expected)
                   : absl::StatusOr<std::vector<VersionInfo>>(refused);
  if (!infos.ok()) {
    const absl::Status not_published = absl::AbortedError(
        absl::StrCat("not published: the atomic batch publishes all items or none, and ",
                     infos.status().message()));
    for (int i = 0; i < items; ++i) answer.Fail(i, not_published);
    return 0;
  }
  for (int i = 0; i < items; ++i) answer.Published(i, (*infos)[i]);
  return infos->empty() ? 0 : infos->front().version;
}

}  // namespace

absl::Status HandoffSession::PutMany(const v1::PutManyRequest& request, ScopedFd memfd,
                                     v1::PutManyResponse& response) {
  WirePutManyRequest wire;
  wire.atomic = request.atomic();
  wire.items.reserve(static_cast<size_t>(request.items_size()));
  for (const v1::PutManyItem& item : request.items()) {
    WirePutManyItem& converted = wire.items.emplace_back();
    converted.name = item.name();
    converted.layout = WireLayoutOf(item.layout());
    converted.total_bytes = item.total_bytes();
    converted.retention = static_cast<int32_t>(item.retention());
    if (item.has_crc32c()) converted.crc32c = item.crc32c();
    converted.offset = item.offset();
  }
  return PutMany(wire, std::move(memfd), response);
}

absl::Status HandoffSession::PutMany(WirePutManyRequest& request, ScopedFd memfd,
                                     v1::PutManyResponse& response) {
  if (cluster_ != nullptr) {
    // A cluster orders its puts through etcd, which the gRPC BatchPut does.
    return MarkUseRemote(absl::FailedPreconditionError(
        "a batch put on a cluster node goes over gRPC (BatchPut), not the handoff socket"));
  }
  if (!memfd.valid()) return absl::InvalidArgumentError("put_many came without its memfd");
  TENSORD_RETURN_IF_ERROR(CheckRequestSize(request));
  if (!scope_.write) {
    return absl::PermissionDeniedError("this connection's token does not grant write");
  }
  TENSORD_RETURN_IF_ERROR(CheckCannotShrink(memfd.get()));
  struct stat file;
  if (::fstat(memfd.get(), &file) != 0 || !S_ISREG(file.st_mode)) {
    return absl::InvalidArgumentError("put_many's fd is not a regular file");
  }
  const uint64_t file_bytes = static_cast<uint64_t>(file.st_size);
  MemfdReader reader(memfd.get(), put_many_window_);
  // Item `index` checked and copied, ready to publish.
  auto prepare = [&](int index) -> absl::StatusOr<PendingVersion> {
    WirePutManyItem& item = request.items[static_cast<size_t>(index)];
    TENSORD_ASSIGN_OR_RETURN(ValidatedPut put, CheckWrite(item.name, std::move(item.layout),
                                                          item.total_bytes, item.retention));
    if (IsDeviceLayout(put.layout)) {
      return absl::InvalidArgumentError(
          absl::StrCat("put_many item '", put.name, "' has a device layout (",
                       DeviceLabel(put.layout.device), "); it carries host tensors only"));
    }
    if (item.offset > file_bytes || put.total_bytes > file_bytes - item.offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("put_many item '", put.name, "' places its ", put.total_bytes,
                       " bytes at offset ", item.offset, " of a memfd of ", file_bytes, " bytes"));
    }
    TENSORD_ASSIGN_OR_RETURN(PendingVersion pending,
                             registry_.Prepare(std::move(put.name), std::move(put.layout),
                                               put.total_bytes, put.retention));
    TENSORD_RETURN_IF_ERROR(reader.CopyTo(item.offset, put.total_bytes, *pending.buffer));
    // pending.crc32c stays unset: the registry sums its own sealed copy.
    return pending;
  };
  const int items = static_cast<int>(request.items.size());
  PutManyAnswer answer(items, response);
  if (request.atomic) {
    response.set_group_version(PublishAtomically(registry_, request, prepare, answer));
  } else {
    PublishEach(registry_, request, prepare, answer);
  }
  FitOnePacket(response);
  metrics_.AddHandoffBytesReceived(answer.published_bytes());
  Log(LogLevel::kInfo, "handoff_batch_put",
      {{"items", items},
       {"published", answer.published()},
       {"failed", items - answer.published()},
       {"bytes", answer.published_bytes()},
       {"atomic", request.atomic ? "true" : "false"},
       {"group_version", response.group_version()},
       {"peer_pid", peer_.pid}});
  return absl::OkStatus();
}

}  // namespace tensord
