// libFuzzer target: what a node reads back from etcd, which any etcd user
// can write: node records and name records. Beyond "no crash", an accepted
// record must survive a round trip through its encoder.
#include <cstddef>
#include <cstdint>
#include <string>

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
  }
  return 0;
}
