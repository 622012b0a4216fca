// libFuzzer target: what a node reads back from etcd, which any etcd user
// can write: node records, directory keys and holder records. Beyond "no
// crash", an accepted record must survive a round trip through its encoder.
#include <cstddef>
#include <cstdint>
#include <string>

#include "service/cluster/directory_record.h"
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
  if (absl::StatusOr<tensord::DirectoryKey> key = tensord::ParseDirectoryKey(kPrefix, kv.key);
      key.ok()) {
    const std::string rebuilt = key->kind == tensord::DirectoryKey::Kind::kHolder
                                    ? tensord::HolderKey(kPrefix, key->name, key->node)
                                    : tensord::TombstoneKey(kPrefix, key->name);
    Check(rebuilt == kv.key);
  }
  if (absl::StatusOr<tensord::HolderRecord> record = tensord::DecodeHolder(kPrefix, kv);
      record.ok()) {
    Check(record->origin > 0 && record->version > 0 && !record->address.empty());
    tensord::EtcdKeyValue written{.key = tensord::HolderKey(kPrefix, record->name, record->node),
                                  .value = tensord::EncodeHolderValue(*record),
                                  .mod_revision = 7};
    absl::StatusOr<tensord::HolderRecord> again = tensord::DecodeHolder(kPrefix, written);
    Check(again.ok() && *again == *record);
  }
  return 0;
}
