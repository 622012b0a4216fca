// A local batch put on the handoff socket (put_many): the client's memfd
// holds every item's bytes; each item is checked as a Put's header is,
// copied into a buffer of the registry's own and published (all under one
// version, or none, for an atomic batch). The memfd is never kept: a
// client-made file must not become a stored version's memory. The client
// may still write it while it is copied; that garbles only its own put,
// since the registry sums the bytes of the server's copy, after sealing it.
#include <fcntl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "service/common/log.h"
#include "service/common/mapped_file.h"
#include "service/common/status_macros.h"
#include "service/common/unix_socket.h"
#include "service/transport/handoff_session.h"
#include "service/transport/request_validation.h"
#include "service/wire/batch_limits.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

// Failure messages the answer carries before it carries codes only: the
// answer must fit one packet whatever the items say (FitOnePacket makes
// sure of it).
constexpr size_t kMessageBudget = 32 * 1024;

// A memfd that cannot shrink: the server's mapping never runs past its end
// (a SIGBUS) however the client treats it meanwhile.
absl::Status CheckCannotShrink(int fd) {
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return absl::InvalidArgumentError(
        "put_many's fd is not a memfd made with MFD_ALLOW_SEALING (F_GET_SEALS failed)");
  }
  if ((seals & F_SEAL_SHRINK) == 0) {
    return absl::InvalidArgumentError(
        "put_many's memfd lacks the seal F_SEAL_SHRINK: it could shrink under the server's "
        "mapping");
  }
  return absl::OkStatus();
}

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

}  // namespace

absl::Status HandoffSession::PutMany(const v1::PutManyRequest& request, ScopedFd memfd,
                                     v1::PutManyResponse& response) {
  if (cluster_ != nullptr) {
    // A cluster orders its puts through etcd, which the gRPC BatchPut does.
    return MarkUseRemote(absl::FailedPreconditionError(
        "a batch put on a cluster node goes over gRPC (BatchPut), not the handoff socket"));
  }
  if (!memfd.valid()) return absl::InvalidArgumentError("put_many came without its memfd");
  if (request.items_size() > static_cast<int>(kMaxPutManyItems)) {
    return absl::InvalidArgumentError(absl::StrCat("put_many of ", request.items_size(),
                                                   " items; one request carries at most ",
                                                   kMaxPutManyItems));
  }
  uint64_t declared = 0;
  for (const v1::PutManyItem& item : request.items()) {
    // Each is at most 2^63 (ValidatePutHeader), so the sum of 4096 cannot wrap
    // past the check.
    declared += std::min<uint64_t>(item.total_bytes(), kMaxPutManyBytes + 1);
  }
  if (declared > kMaxPutManyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("put_many declares more than ", kMaxPutManyBytes,
                     " bytes of items; one request carries at most that much"));
  }
  if (!scope_.write) {
    return absl::PermissionDeniedError("this connection's token does not grant write");
  }
  TENSORD_RETURN_IF_ERROR(CheckCannotShrink(memfd.get()));
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped,
                           MappedFile::Map(memfd.get(), "put_many's memfd"));
  const std::string_view bytes = mapped->bytes();

  size_t message_bytes = 0;
  auto fail = [&](int index, const absl::Status& status) {
    v1::ItemStatus* item_status = response.mutable_results(index)->mutable_status();
    item_status->set_code(static_cast<int32_t>(status.code()));
    if (message_bytes < kMessageBudget) {
      item_status->set_message(std::string(status.message()));
      message_bytes += status.message().size();
    }
  };
  // Item `index` checked and copied, ready to publish.
  auto prepare = [&](int index) -> absl::StatusOr<PendingVersion> {
    const v1::PutManyItem& item = request.items(index);
    TENSORD_ASSIGN_OR_RETURN(ValidatedPut put, CheckWrite(item.name(), item.layout(),
                                                          item.total_bytes(), item.retention()));
    if (IsDeviceLayout(put.layout)) {
      return absl::InvalidArgumentError(
          absl::StrCat("put_many item '", put.name, "' has a device layout (",
                       DeviceLabel(put.layout.device), "); it carries host tensors only"));
    }
    if (item.offset() > bytes.size() || put.total_bytes > bytes.size() - item.offset()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "put_many item '", put.name, "' places its ", put.total_bytes, " bytes at offset ",
          item.offset(), " of a memfd of ", bytes.size(), " bytes"));
    }
    TENSORD_ASSIGN_OR_RETURN(PendingVersion pending,
                             registry_.Prepare(std::move(put.name), std::move(put.layout),
                                               put.total_bytes, put.retention));
    if (put.total_bytes > 0) {
      TENSORD_RETURN_IF_ERROR(
          pending.buffer->Write(0, bytes.data() + item.offset(), put.total_bytes));
    }
    // pending.crc32c stays unset: the registry sums its own sealed copy.
    return pending;
  };
  auto expected_of = [&](int index) {
    const v1::PutManyItem& item = request.items(index);
    return item.has_crc32c() ? std::optional<uint32_t>(item.crc32c()) : std::nullopt;
  };
  auto set_published = [&](int index, const VersionInfo& info) {
    v1::PutManyResult& result = *response.mutable_results(index);
    result.set_version(info.version);
    result.set_crc32c(info.crc32c);
    result.set_created_unix_nanos(absl::ToUnixNanos(info.created));
  };

  for (int i = 0; i < request.items_size(); ++i) response.add_results();
  uint64_t published_bytes = 0;
  int published = 0;
  if (!request.atomic()) {
    for (int i = 0; i < request.items_size(); ++i) {
      absl::StatusOr<PendingVersion> pending = prepare(i);
      absl::StatusOr<VersionInfo> info =
          pending.ok() ? registry_.Publish(*std::move(pending), expected_of(i)) : pending.status();
      if (!info.ok()) {
        fail(i, info.status());
        continue;
      }
      set_published(i, *info);
      published_bytes += info->total_bytes;
      ++published;
    }
  } else {
    // All or none: the first refusal fails every item, naming it.
    std::vector<PendingVersion> group;
    std::vector<std::optional<uint32_t>> expected;
    absl::Status refused;
    for (int i = 0; i < request.items_size() && refused.ok(); ++i) {
      absl::StatusOr<PendingVersion> pending = prepare(i);
      if (!pending.ok()) {
        refused = absl::Status(pending.status().code(),
                               absl::StrCat("item ", i, ": ", pending.status().message()));
        continue;
      }
      group.push_back(*std::move(pending));
      expected.push_back(expected_of(i));
    }
    absl::StatusOr<std::vector<VersionInfo>> infos =
        refused.ok() ? registry_.PublishGroup(std::move(group), expected)
                     : absl::StatusOr<std::vector<VersionInfo>>(refused);
    if (!infos.ok()) {
      const absl::Status not_published = absl::AbortedError(
          absl::StrCat("not published: the atomic batch publishes all items or none, and ",
                       infos.status().message()));
      for (int i = 0; i < request.items_size(); ++i) fail(i, not_published);
    } else {
      for (int i = 0; i < request.items_size(); ++i) {
        set_published(i, (*infos)[i]);
        published_bytes += (*infos)[i].total_bytes;
      }
      published = request.items_size();
      if (!infos->empty()) response.set_group_version(infos->front().version);
    }
  }
  FitOnePacket(response);
  metrics_.AddHandoffBytesReceived(published_bytes);
  Log(LogLevel::kInfo, "handoff_batch_put",
      {{"items", request.items_size()},
       {"published", published},
       {"failed", request.items_size() - published},
       {"bytes", published_bytes},
       {"atomic", request.atomic() ? "true" : "false"},
       {"group_version", response.group_version()},
       {"peer_pid", peer_.pid}});
  return absl::OkStatus();
}

}  // namespace tensord
