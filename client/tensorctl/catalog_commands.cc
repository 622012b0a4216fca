// stat, ls and rm: what the server holds, and removing it.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "client/tensorctl/commands.h"
#include "client/tensorctl/tensor_text.h"
#include "service/common/byte_size.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"

namespace tensord::tensorctl {
namespace {

std::string FormatCreated(absl::Time created) {
  // A server that does not report the time leaves it at a default.
  if (created == absl::Time() || created == absl::UnixEpoch() || created == absl::InfinitePast()) {
    return "unknown";
  }
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S %Z", created, absl::LocalTimeZone());
}

// Columns of `ls`; widths fit the longest cell.
constexpr size_t kListColumns = 6;
using ListRow = std::array<std::string, kListColumns>;

void PrintRow(const ListRow& row, const std::array<size_t, kListColumns>& widths) {
  // VERSION and SIZE align right so that their digits line up.
  absl::PrintF("%-*s  %*s  %-*s  %-*s  %*s  %s\n", static_cast<int>(widths[0]), row[0],
               static_cast<int>(widths[1]), row[1], static_cast<int>(widths[2]), row[2],
               static_cast<int>(widths[3]), row[3], static_cast<int>(widths[4]), row[4], row[5]);
}

}  // namespace

absl::Status RunStat(Client& client, const Invocation& invocation) {
  const std::string& name = invocation.arguments[0];
  TENSORD_ASSIGN_OR_RETURN(TensorInfo info, client.Stat(name, invocation.Number(kVersionOption)));
  absl::PrintF("name:        %s\n", name);
  absl::PrintF("version:     %d\n", info.version);
  absl::PrintF("dtype:       %s\n", dlpack::DataTypeName(info.dtype));
  absl::PrintF("shape:       %s\n", FormatShape(info.shape));
  absl::PrintF("strides:     %s\n", FormatShape(info.strides));
  absl::PrintF("byte_offset: %d\n", info.byte_offset);
  absl::PrintF("device:      %s\n", FormatDevice(info.device));
  absl::PrintF("size:        %s (%d bytes)\n", FormatByteSize(info.total_bytes), info.total_bytes);
  absl::PrintF("crc32c:      0x%08x\n", info.crc32c);
  absl::PrintF("created:     %s\n", FormatCreated(info.created));
  absl::PrintF("open leases: %d\n", info.open_leases);
  absl::PrintF("retention:   %s\n", RetentionName(info.retention));
  return absl::OkStatus();
}

namespace {

// ls --cluster: the durable names' etcd records, which hold less than a
// node's own listing (no layout; the writer and the record's revision).
absl::Status ListCluster(Client& client, const std::string& prefix) {
  std::vector<TensorInfo> tensors;
  std::string token;
  do {
    TENSORD_ASSIGN_OR_RETURN(ListResult page, client.ListCluster(prefix, 1000, token));
    for (TensorInfo& info : page.tensors) tensors.push_back(std::move(info));
    token = std::move(page.next_page_token);
  } while (!token.empty());
  size_t name_width = 4;
  size_t node_width = 4;
  for (const TensorInfo& info : tensors) {
    name_width = std::max(name_width, info.name.size());
    node_width = std::max(node_width, info.node.size());
  }
  uint64_t total_bytes = 0;
  if (!tensors.empty()) {
    absl::PrintF("%-*s  %-*s  %s  %s\n", name_width, "NAME", node_width, "NODE", "VERSION", "SIZE");
  }
  for (const TensorInfo& info : tensors) {
    absl::PrintF("%-*s  %-*s  %7d  %s\n", name_width, info.name, node_width, info.node,
                 info.version, FormatByteSize(info.total_bytes));
    total_bytes += info.total_bytes;
  }
  absl::PrintF("%d %s in the cluster, %s\n", tensors.size(), tensors.size() == 1 ? "name" : "names",
               FormatByteSize(total_bytes));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunList(Client& client, const Invocation& invocation) {
  const std::string prefix = invocation.arguments.empty() ? "" : invocation.arguments[0];
  if (invocation.Has(kClusterOption)) return ListCluster(client, prefix);
  TENSORD_ASSIGN_OR_RETURN(std::vector<TensorInfo> tensors, client.ListAll(prefix));
  const ListRow heading = {"NAME", "VERSION", "DTYPE", "SHAPE", "SIZE", "DEVICE"};
  std::vector<ListRow> rows;
  rows.reserve(tensors.size());
  uint64_t total_bytes = 0;
  for (const TensorInfo& info : tensors) {
    rows.push_back({info.name, absl::StrCat(info.version), dlpack::DataTypeName(info.dtype),
                    FormatShape(info.shape), FormatByteSize(info.total_bytes),
                    FormatDevice(info.device)});
    total_bytes += info.total_bytes;
  }
  std::array<size_t, kListColumns> widths{};
  for (size_t column = 0; column < kListColumns; ++column) {
    widths[column] = heading[column].size();
    for (const ListRow& row : rows) widths[column] = std::max(widths[column], row[column].size());
  }
  if (!rows.empty()) {
    PrintRow(heading, widths);
    for (const ListRow& row : rows) PrintRow(row, widths);
  }
  absl::PrintF("%d %s, %s (%d bytes)\n", rows.size(), rows.size() == 1 ? "tensor" : "tensors",
               FormatByteSize(total_bytes), total_bytes);
  return absl::OkStatus();
}

absl::Status RunRemove(Client& client, const Invocation& invocation) {
  const std::string& name = invocation.arguments[0];
  TENSORD_ASSIGN_OR_RETURN(uint64_t removed,
                           client.Delete(name, invocation.Number(kVersionOption)));
  absl::PrintF("rm %s version %d\n", name, removed);
  return absl::OkStatus();
}

absl::Status RunHealth(Client& client, const Invocation&) {
  absl::StatusOr<std::string> status = client.Health();
  if (!status.ok()) return status.status();
  std::printf("%s\n", status->c_str());
  if (*status != "SERVING") {
    return absl::UnavailableError(absl::StrCat("server reports ", *status));
  }
  return absl::OkStatus();
}

absl::Status RunSnapshot(Client& client, const Invocation&) {
  absl::StatusOr<SnapshotResult> snapshot = client.Snapshot();
  if (!snapshot.ok()) return snapshot.status();
  absl::PrintF("snapshot %s: %d tensors, %s\n", snapshot->path, snapshot->tensor_count,
               FormatByteSize(snapshot->total_bytes));
  return absl::OkStatus();
}

absl::Status RunNodes(Client& client, const Invocation&) {
  TENSORD_ASSIGN_OR_RETURN(ClusterMembers members, client.ClusterNodes());
  if (members.node_name.empty()) {
    std::printf("single node: the server is in no cluster (it runs without --etcd-endpoints)\n");
    return absl::OkStatus();
  }
  std::vector<std::array<std::string, 6>> rows = {
      {"NODE", "ADDRESS", "HANDOFF", "HOST MEMORY", "VERSION", "STARTED"}};
  for (const ClusterNode& node : members.nodes) {
    rows.push_back({node.name == members.node_name ? absl::StrCat(node.name, " *") : node.name,
                    node.advertise_address, node.handoff_available ? "yes" : "no",
                    absl::StrCat(FormatByteSize(node.host_bytes_used), " / ",
                                 FormatByteSize(node.host_bytes_limit)),
                    node.server_version, FormatCreated(node.started)});
  }
  std::array<size_t, 6> widths{};
  for (const auto& row : rows) {
    for (size_t column = 0; column < row.size(); ++column) {
      widths[column] = std::max(widths[column], row[column].size());
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t column = 0; column < row.size(); ++column) {
      absl::StrAppend(
          &line, row[column],
          column + 1 < row.size() ? std::string(widths[column] - row[column].size() + 2, ' ') : "");
    }
    std::printf("%s\n", line.c_str());
  }
  std::printf("%zu %s (* = the node asked: %s)\n", members.nodes.size(),
              members.nodes.size() == 1 ? "node" : "nodes", members.node_name.c_str());
  return absl::OkStatus();
}

}  // namespace tensord::tensorctl
