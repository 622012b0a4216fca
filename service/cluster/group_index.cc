#include "service/cluster/group_index.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "service/cluster/name_record.h"
#include "service/cluster/node_record.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/common/tensor_name.h"

namespace tensord {
namespace {

using Json = nlohmann::json;

// Above any transaction etcd accepts (--max-request-bytes is 1.5 MiB by
// default, at most a few tens of MiB in practice).
constexpr size_t kMaxIndexValueBytes = 64 << 20;
constexpr size_t kMaxGroupIdBytes = 512;
constexpr int64_t kSweepPageKeys = 256;

// Whether every member's record still holds the version the group wrote.
absl::StatusOr<bool> GroupIsWhole(KvStore& store, absl::string_view prefix,
                                  const GroupMembers& members, int64_t revision,
                                  size_t max_txn_ops) {
  const size_t per_txn = std::max<size_t>(max_txn_ops, 1);
  for (size_t start = 0; start < members.names.size(); start += per_txn) {
    const size_t end = std::min(members.names.size(), start + per_txn);
    std::vector<KvOp> reads;
    for (size_t i = start; i < end; ++i) {
      reads.push_back(KvOp::Get(NameRecordKey(prefix, members.names[i])));
    }
    TENSORD_ASSIGN_OR_RETURN(KvTxnResult read, store.Txn({}, reads, {}));
    for (const KvOpResult& result : read.results) {
      if (result.values.empty()) return false;  // deleted
      absl::StatusOr<NameRecord> record = DecodeNameRecord(prefix, result.values.front());
      if (!record.ok() || record->group != members.group || record->origin != revision) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

std::string GroupIndexPrefix(absl::string_view prefix) { return absl::StrCat(prefix, "/groups/"); }

std::string GroupIndexKey(absl::string_view prefix, absl::string_view group) {
  return absl::StrCat(prefix, "/groups/", group);
}

std::string EncodeGroupIndex(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  return Json{{"names", std::move(names)}}.dump();
}

absl::StatusOr<GroupMembers> DecodeGroupIndex(absl::string_view prefix, const EtcdKeyValue& kv) {
  auto bad = [&](absl::string_view why) {
    return NotWrittenByTensord("group index key", kv.key, kv.value, why);
  };
  absl::string_view group = kv.key;
  if (!absl::ConsumePrefix(&group, GroupIndexPrefix(prefix))) return bad("outside the index");
  if (group.empty() || group.size() > kMaxGroupIdBytes || group.find('/') != group.npos) {
    return bad("not a group id");
  }
  if (kv.value.size() > kMaxIndexValueBytes) return bad(absl::StrCat(kv.value.size(), " bytes"));
  Json value = Json::parse(kv.value.begin(), kv.value.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) return bad("not a JSON object");
  auto names = value.find("names");
  if (names == value.end() || !names->is_array() || names->empty()) {
    return bad("field names missing, empty or not a list");
  }
  GroupMembers members{.group = std::string(group)};
  for (const Json& name : *names) {
    if (!name.is_string() || !ValidateTensorName(name.get<std::string>()).ok()) {
      return bad("a member is not a tensor name");
    }
    members.names.push_back(name.get<std::string>());
  }
  std::sort(members.names.begin(), members.names.end());
  if (std::adjacent_find(members.names.begin(), members.names.end()) != members.names.end()) {
    return bad("a member is listed twice");
  }
  return members;
}

std::vector<std::string> GroupsBrokenBy(absl::string_view prefix,
                                        std::span<const EtcdKeyValue> replaced,
                                        const absl::flat_hash_set<std::string>& written) {
  absl::flat_hash_set<std::string> broken;
  for (const EtcdKeyValue& kv : replaced) {
    if (!RecordValueNamesAGroup(kv.value)) continue;  // most records: no parse
    absl::StatusOr<NameRecord> record = DecodeNameRecord(prefix, kv);
    if (record.ok() && !record->group.empty() && !written.contains(record->group)) {
      broken.insert(record->group);
    }
  }
  std::vector<std::string> groups(broken.begin(), broken.end());
  std::sort(groups.begin(), groups.end());
  return groups;
}

absl::Status RemoveGroupIndexKeys(KvStore& store, absl::string_view prefix,
                                  std::span<const std::string> groups, size_t max_txn_ops) {
  const size_t per_txn = std::max<size_t>(max_txn_ops, 1);
  for (size_t start = 0; start < groups.size(); start += per_txn) {
    std::vector<KvOp> deletes;
    for (size_t i = start; i < std::min(groups.size(), start + per_txn); ++i) {
      deletes.push_back(KvOp::Delete(GroupIndexKey(prefix, groups[i])));
    }
    TENSORD_RETURN_IF_ERROR(store.Txn({}, deletes, {}).status());
  }
  return absl::OkStatus();
}

size_t RemoveGroupsBrokenBy(KvStore& store, absl::string_view prefix,
                            std::span<const EtcdKeyValue> replaced,
                            const absl::flat_hash_set<std::string>& written, size_t max_txn_ops) {
  const std::vector<std::string> broken = GroupsBrokenBy(prefix, replaced, written);
  if (broken.empty()) return 0;
  if (absl::Status removed = RemoveGroupIndexKeys(store, prefix, broken, max_txn_ops);
      !removed.ok()) {
    Log(LogLevel::kWarning, "cluster_group_index_not_removed",
        {{"groups", broken.size()}, {"first", broken.front()}, {"error", removed.ToString()}});
    return 0;
  }
  return broken.size();
}

absl::StatusOr<size_t> SweepBrokenGroups(KvStore& store, absl::string_view prefix,
                                         size_t max_txn_ops) {
  struct Indexed {
    GroupMembers members;
    int64_t revision = 0;
  };
  std::vector<Indexed> indexed;
  std::vector<std::string> broken;
  const std::string index_prefix = GroupIndexPrefix(prefix);
  TENSORD_RETURN_IF_ERROR(
      KvReadPrefix(store, index_prefix, kSweepPageKeys, [&](std::vector<EtcdKeyValue> page) {
        for (const EtcdKeyValue& kv : page) {
          absl::StatusOr<GroupMembers> members = DecodeGroupIndex(prefix, kv);
          if (members.ok()) {
            indexed.push_back(Indexed{*std::move(members), kv.create_revision});
            continue;
          }
          // Not one tensord wrote: left alone, and logged.
          Log(LogLevel::kWarning, "cluster_group_index_unreadable",
              {{"key", RecordExcerpt(kv.key)}, {"error", members.status().ToString()}});
        }
      }).status());
  for (const Indexed& group : indexed) {
    TENSORD_ASSIGN_OR_RETURN(
        bool whole, GroupIsWhole(store, prefix, group.members, group.revision, max_txn_ops));
    if (!whole) broken.push_back(group.members.group);
  }
  TENSORD_RETURN_IF_ERROR(RemoveGroupIndexKeys(store, prefix, broken, max_txn_ops));
  return broken.size();
}

}  // namespace tensord
