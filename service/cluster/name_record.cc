#include "service/cluster/name_record.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "service/cluster/node_record.h"
#include "service/common/tensor_name.h"

namespace tensord {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxValueBytes = 8192;

}  // namespace

std::string NameRecordPrefix(absl::string_view prefix) { return absl::StrCat(prefix, "/names/"); }

std::string NameRecordKey(absl::string_view prefix, absl::string_view name) {
  return absl::StrCat(prefix, "/names/", name);
}

std::string EncodeNameRecord(const NameRecord& record, bool with_origin) {
  Json value = {{"writer", record.writer},
                {"total_bytes", record.total_bytes},
                {"crc32c", record.crc32c},
                {"holders", record.holders}};
  if (with_origin) value["origin"] = record.origin;
  if (!record.group.empty()) value["group"] = record.group;
  if (!record.put_id.empty()) value["put"] = record.put_id;
  return value.dump();
}

bool RecordValueOrdersAVersion(absl::string_view value) {
  // Cheap and exact for what EncodeNameRecord writes: "origin" appears only
  // as that key (names and nodes are elsewhere, never a bare JSON key).
  return !absl::StrContains(value, "\"origin\":");
}

bool RecordValueNamesAGroup(absl::string_view value) {
  // As above: "group" appears only as that key in what EncodeNameRecord
  // writes.
  return absl::StrContains(value, "\"group\":");
}

absl::StatusOr<NameRecord> DecodeNameRecord(absl::string_view prefix, const EtcdKeyValue& kv) {
  auto bad = [&](absl::string_view why) {
    return NotWrittenByTensord("name record", kv.key, kv.value, why);
  };
  absl::string_view name = kv.key;
  if (!absl::ConsumePrefix(&name, NameRecordPrefix(prefix))) return bad("outside the records");
  if (absl::Status valid = ValidateTensorName(name); !valid.ok()) return bad(valid.message());
  if (kv.value.size() > kMaxValueBytes) return bad(absl::StrCat(kv.value.size(), " bytes"));
  Json value = Json::parse(kv.value.begin(), kv.value.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) return bad("not a JSON object");
  NameRecord record{.name = std::string(name), .mod_revision = kv.mod_revision};
  auto unsigned_field = [&](const char* field, uint64_t max, uint64_t& out) -> bool {
    auto it = value.find(field);
    if (it == value.end() || !it->is_number_unsigned()) return false;
    out = it->get<uint64_t>();
    return out <= max;
  };
  uint64_t total_bytes = 0, crc = 0, origin = 0;
  if (!unsigned_field("total_bytes", UINT64_MAX, total_bytes)) {
    return bad("field total_bytes missing or invalid");
  }
  if (!unsigned_field("crc32c", UINT32_MAX, crc)) return bad("field crc32c missing or invalid");
  if (value.contains("origin") && (!unsigned_field("origin", INT64_MAX, origin) || origin == 0 ||
                                   static_cast<int64_t>(origin) > kv.mod_revision)) {
    return bad("field origin is not a revision at or before the key's");
  }
  auto writer = value.find("writer");
  if (writer == value.end() || !writer->is_string() ||
      !ValidateNodeName(writer->get<std::string>()).ok()) {
    return bad("field writer missing or not a node name");
  }
  auto holders = value.find("holders");
  if (holders == value.end() || !holders->is_array() || holders->empty() ||
      holders->size() > kMaxRecordHolders) {
    return bad(absl::StrCat("field holders missing, empty or over ", kMaxRecordHolders));
  }
  for (const Json& holder : *holders) {
    if (!holder.is_string() || !ValidateNodeName(holder.get<std::string>()).ok()) {
      return bad("a holder is not a node name");
    }
    record.holders.push_back(holder.get<std::string>());
  }
  if (auto group = value.find("group"); group != value.end()) {
    if (!group->is_string() || group->get<std::string>().empty()) return bad("field group invalid");
    record.group = group->get<std::string>();
  }
  if (auto put = value.find("put"); put != value.end()) {
    if (!put->is_string() || put->get<std::string>().empty()) return bad("field put invalid");
    record.put_id = put->get<std::string>();
  }
  record.writer = writer->get<std::string>();
  record.total_bytes = total_bytes;
  record.crc32c = static_cast<uint32_t>(crc);
  record.origin = origin != 0 ? static_cast<int64_t>(origin) : kv.mod_revision;
  return record;
}

}  // namespace tensord
