// The cluster directory's keys and values in etcd. Under <prefix>/names/:
//   h/<tensor name>#<node name>  one holder of a name's latest version,
//                                bound to the holder's lease
//   d/<tensor name>              a delete, bound to a short-lived lease
// '#' separates because neither tensor nor node names may contain it, so
// the keys of one name are exactly those starting with "h/<name>#".
// Values are small JSON objects, readable with `etcdctl get`.
#ifndef TENSORD_SERVICE_CLUSTER_DIRECTORY_RECORD_H_
#define TENSORD_SERVICE_CLUSTER_DIRECTORY_RECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/cluster/etcd_client.h"

namespace tensord {

// One node's copy of a name's version, as the directory lists it.
struct HolderRecord {
  std::string name;     // from the key
  std::string node;     // from the key
  std::string address;  // the holder's advertise address (host:port)
  // The version number on the holder (each node numbers its own).
  uint64_t version = 0;
  // The cluster-wide order of the version: the etcd revision at which its
  // original publish was registered. A replica keeps its original's.
  int64_t origin = 0;
  uint64_t total_bytes = 0;
  uint32_t crc32c = 0;
  // A copy pulled or pushed from another holder, not the original publish.
  bool replica = false;

  bool operator==(const HolderRecord&) const = default;
};

struct DirectoryKey {
  enum class Kind { kHolder, kTombstone };
  Kind kind = Kind::kHolder;
  std::string name;
  std::string node;  // holders only
};

std::string DirectoryPrefix(absl::string_view prefix);
std::string HolderKey(absl::string_view prefix, absl::string_view name, absl::string_view node);
// The keys of every holder of `name`.
std::string HolderKeysOf(absl::string_view prefix, absl::string_view name);
std::string TombstoneKey(absl::string_view prefix, absl::string_view name);

// DATA_LOSS naming the key when it is under DirectoryPrefix(prefix) but not
// a directory key tensord writes.
absl::StatusOr<DirectoryKey> ParseDirectoryKey(absl::string_view prefix, absl::string_view key);

// The value of a holder key. An original publish is written with origin 0,
// since its revision is known only once written: readers take the key's
// mod_revision then.
std::string EncodeHolderValue(const HolderRecord& record);
// Parses a holder key and its value (as etcd returned them). DATA_LOSS,
// naming the key, when either is not what EncodeHolderValue and HolderKey
// write; unknown JSON fields are ignored (a newer tensord may add some).
absl::StatusOr<HolderRecord> DecodeHolder(absl::string_view prefix, const EtcdKeyValue& kv);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_DIRECTORY_RECORD_H_
