#include "service/cluster/node_record.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tensord {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxNodeNameBytes = 253;
// A record is a few hundred bytes; anything far larger is not ours.
constexpr size_t kMaxRecordBytes = 64 * 1024;

}  // namespace

std::string RecordExcerpt(absl::string_view text) {
  constexpr size_t kMax = 80;
  return text.size() <= kMax ? std::string(text) : absl::StrCat(text.substr(0, kMax), "...");
}

absl::Status NotWrittenByTensord(absl::string_view what, absl::string_view key,
                                 absl::string_view value, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(what, " '", RecordExcerpt(key), "' = '",
                                          RecordExcerpt(value),
                                          "' is not one tensord writes: ", why));
}

absl::Status ValidateNodeName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNodeNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node name '", RecordExcerpt(name), "' must be 1..", kMaxNodeNameBytes, " characters"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("node name '", RecordExcerpt(name), "' has '", std::string(1, c),
                       "'; node names may hold only letters, digits, '.', '_' and '-'"));
    }
  }
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("node name '", name, "' is not a name"));
  }
  return absl::OkStatus();
}

std::string EncodeNodeRecord(const ClusterMember& member) {
  Json record = {{"node_name", member.node_name},
                 {"advertise_address", member.advertise_address},
                 {"handoff_available", member.handoff_available},
                 {"host_bytes_used", member.host_bytes_used},
                 {"host_bytes_limit", member.host_bytes_limit},
                 {"server_version", member.server_version},
                 {"start_time_unix_ms", member.start_time_unix_ms},
                 {"instance_id", member.instance_id}};
  return record.dump();
}

absl::StatusOr<ClusterMember> DecodeNodeRecord(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("node record '", RecordExcerpt(text),
                                            "' is not a tensord node record: ", why));
  };
  if (text.size() > kMaxRecordBytes) return bad(absl::StrCat(text.size(), " bytes is too large"));
  Json record = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (record.is_discarded()) return bad("not JSON");
  if (!record.is_object()) return bad("not a JSON object");
  ClusterMember member;
  // Every field is required and must have its type: a record we cannot
  // read fully is reported, not half-used.
  auto text_field = [&](const char* key, std::string& out) -> absl::Status {
    auto it = record.find(key);
    if (it == record.end() || !it->is_string()) {
      return bad(absl::StrCat("field ", key, " missing or not a string"));
    }
    out = it->get<std::string>();
    return absl::OkStatus();
  };
  auto unsigned_field = [&](const char* key, uint64_t& out) -> absl::Status {
    auto it = record.find(key);
    if (it == record.end() || !it->is_number_unsigned()) {
      return bad(absl::StrCat("field ", key, " missing or not a non-negative integer"));
    }
    out = it->get<uint64_t>();
    return absl::OkStatus();
  };
  for (auto [key, out] : {std::pair<const char*, std::string*>{"node_name", &member.node_name},
                          {"advertise_address", &member.advertise_address},
                          {"server_version", &member.server_version},
                          {"instance_id", &member.instance_id}}) {
    if (absl::Status status = text_field(key, *out); !status.ok()) return status;
  }
  for (auto [key, out] :
       {std::pair<const char*, uint64_t*>{"host_bytes_used", &member.host_bytes_used},
        {"host_bytes_limit", &member.host_bytes_limit}}) {
    if (absl::Status status = unsigned_field(key, *out); !status.ok()) return status;
  }
  auto handoff = record.find("handoff_available");
  if (handoff == record.end() || !handoff->is_boolean()) {
    return bad("field handoff_available missing or not a boolean");
  }
  member.handoff_available = handoff->get<bool>();
  auto start = record.find("start_time_unix_ms");
  if (start == record.end() || !start->is_number_integer()) {
    return bad("field start_time_unix_ms missing or not an integer");
  }
  member.start_time_unix_ms = start->get<int64_t>();
  if (absl::Status status = ValidateNodeName(member.node_name); !status.ok()) {
    return bad(status.message());
  }
  if (member.advertise_address.empty()) return bad("advertise_address is empty");
  return member;
}

}  // namespace tensord
