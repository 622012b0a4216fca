#include "service/cluster/directory_record.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "service/cluster/node_record.h"
#include "service/common/tensor_name.h"

namespace tensord {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxValueBytes = 4096;

std::string Excerpt(absl::string_view text) {
  constexpr size_t kMax = 80;
  return text.size() <= kMax ? std::string(text) : absl::StrCat(text.substr(0, kMax), "...");
}

}  // namespace

std::string DirectoryPrefix(absl::string_view prefix) { return absl::StrCat(prefix, "/names/"); }

std::string HolderKey(absl::string_view prefix, absl::string_view name, absl::string_view node) {
  return absl::StrCat(prefix, "/names/h/", name, "#", node);
}

std::string HolderKeysOf(absl::string_view prefix, absl::string_view name) {
  return absl::StrCat(prefix, "/names/h/", name, "#");
}

std::string TombstoneKey(absl::string_view prefix, absl::string_view name) {
  return absl::StrCat(prefix, "/names/d/", name);
}

absl::StatusOr<DirectoryKey> ParseDirectoryKey(absl::string_view prefix, absl::string_view key) {
  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("directory key '", Excerpt(key), "' is not one tensord writes: ", why));
  };
  absl::string_view rest = key;
  const std::string directory = DirectoryPrefix(prefix);
  if (!absl::ConsumePrefix(&rest, directory)) return bad("outside the directory");
  DirectoryKey parsed;
  if (absl::ConsumePrefix(&rest, "h/")) {
    const size_t hash = rest.rfind('#');
    if (hash == absl::string_view::npos) return bad("a holder key without '#'");
    parsed.kind = DirectoryKey::Kind::kHolder;
    parsed.name = std::string(rest.substr(0, hash));
    parsed.node = std::string(rest.substr(hash + 1));
    if (absl::Status valid = ValidateNodeName(parsed.node); !valid.ok()) return bad(valid.message());
  } else if (absl::ConsumePrefix(&rest, "d/")) {
    parsed.kind = DirectoryKey::Kind::kTombstone;
    parsed.name = std::string(rest);
  } else {
    return bad("neither h/ nor d/");
  }
  if (absl::Status valid = ValidateTensorName(parsed.name); !valid.ok()) return bad(valid.message());
  return parsed;
}

std::string EncodeHolderValue(const HolderRecord& record) {
  Json value = {{"address", record.address},       {"version", record.version},
                {"origin", record.origin},         {"total_bytes", record.total_bytes},
                {"crc32c", record.crc32c},         {"replica", record.replica}};
  return value.dump();
}

absl::StatusOr<HolderRecord> DecodeHolder(absl::string_view prefix, const EtcdKeyValue& kv) {
  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("directory entry '", Excerpt(kv.key), "' = '",
                                            Excerpt(kv.value), "' is not a holder record: ", why));
  };
  absl::StatusOr<DirectoryKey> key = ParseDirectoryKey(prefix, kv.key);
  if (!key.ok()) return key.status();
  if (key->kind != DirectoryKey::Kind::kHolder) return bad("not a holder key");
  if (kv.value.size() > kMaxValueBytes) return bad(absl::StrCat(kv.value.size(), " bytes"));
  Json value = Json::parse(kv.value.begin(), kv.value.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) return bad("not a JSON object");
  HolderRecord record{.name = std::move(key->name), .node = std::move(key->node)};
  auto unsigned_field = [&](const char* field, uint64_t max, uint64_t& out) -> bool {
    auto it = value.find(field);
    if (it == value.end() || !it->is_number_unsigned()) return false;
    out = it->get<uint64_t>();
    return out <= max;
  };
  uint64_t version = 0, origin = 0, total_bytes = 0, crc = 0;
  if (!unsigned_field("version", UINT64_MAX, version) || version == 0) {
    return bad("field version missing or not a positive integer");
  }
  if (!unsigned_field("origin", INT64_MAX, origin)) return bad("field origin missing or invalid");
  if (!unsigned_field("total_bytes", UINT64_MAX, total_bytes)) {
    return bad("field total_bytes missing or invalid");
  }
  if (!unsigned_field("crc32c", UINT32_MAX, crc)) return bad("field crc32c missing or invalid");
  auto address = value.find("address");
  if (address == value.end() || !address->is_string() || address->get<std::string>().empty()) {
    return bad("field address missing or empty");
  }
  auto replica = value.find("replica");
  if (replica == value.end() || !replica->is_boolean()) return bad("field replica missing");
  record.address = address->get<std::string>();
  record.version = version;
  record.origin = origin != 0 ? static_cast<int64_t>(origin) : kv.mod_revision;
  record.total_bytes = total_bytes;
  record.crc32c = static_cast<uint32_t>(crc);
  record.replica = replica->get<bool>();
  return record;
}

}  // namespace tensord
