// libFuzzer target: what a node reads back from etcd, which any etcd user
// can write: node records, name records and group index keys. Beyond "no
// crash", an accepted record must survive a round trip through its encoder.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "service/cluster/group_index.h"
#include "service/cluster/name_record.h"
#include "service/cluster/node_record.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr char kPrefix[] = "/tensord";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (absl::StatusOr<tensord::ClusterMember> member = tensord::DecodeNodeRecord(input);
      member.ok()) {
    absl::StatusOr<tensord::ClusterMember> again =
        tensord::DecodeNodeRecord(tensord::EncodeNodeRecord(*member));
    Check(again.ok() && *again == *member);
  }
  // The first line is the key, the rest the value.
  const size_t newline = input.find('\n');
  tensord::EtcdKeyValue kv;
  kv.key = input.substr(0, newline);
  kv.value = newline == std::string::npos ? "" : input.substr(newline + 1);
  kv.mod_revision = 42;
  if (absl::StatusOr<tensord::NameRecord> record = tensord::DecodeNameRecord(kPrefix, kv);
      record.ok()) {
    Check(record->origin > 0 && record->origin <= kv.mod_revision && !record->holders.empty() &&
          record->mod_revision == kv.mod_revision);
    Check(tensord::NameRecordKey(kPrefix, record->name) == kv.key);
    // Written back as a rewrite of the same version, it reads the same.
    tensord::EtcdKeyValue written{.key = kv.key,
                                  .value = tensord::EncodeNameRecord(*record, /*with_origin=*/true),
                                  .mod_revision = kv.mod_revision};
    absl::StatusOr<tensord::NameRecord> again = tensord::DecodeNameRecord(kPrefix, written);
    Check(again.ok() && *again == *record);
    // The cheap check never misses a group in what tensord writes.
    Check(record->group.empty() || tensord::RecordValueNamesAGroup(written.value));
  }
  // The same line split as a group index key: its members come back in
  // name order, and encoded again they read the same.
  if (absl::StatusOr<tensord::GroupMembers> group = tensord::DecodeGroupIndex(kPrefix, kv);
      group.ok()) {
    Check(!group->names.empty() && std::is_sorted(group->names.begin(), group->names.end()));
    Check(tensord::GroupIndexKey(kPrefix, group->group) == kv.key);
    const tensord::EtcdKeyValue written{.key = kv.key,
                                        .value = tensord::EncodeGroupIndex(group->names)};
    absl::StatusOr<tensord::GroupMembers> again = tensord::DecodeGroupIndex(kPrefix, written);
    Check(again.ok() && again->group == group->group && again->names == group->names);
  }
  return 0;
}
