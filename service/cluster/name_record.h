// A durable name's record in etcd: which version of the name is the latest
// in the cluster's order, and which nodes hold a durable copy of it.
//
//   <prefix>/names/<tensor name> = {"writer": node, "total_bytes": N,
//       "crc32c": C, "holders": [node, ...], "put": id, "origin": R, "group": G}
//
// One key per name, with no lease: it outlives every node, so a node that
// dies or restarts cannot take an acknowledged version with it or bring an
// overwritten one back. The record is the only place a durable name's order
// is kept; a node's copy is the latest exactly while its origin equals the
// record's.
//
// The origin is the etcd revision of the write that made this version the
// latest. That write stores no "origin" (its revision is known only once
// written): readers take the key's mod_revision. Later writes of the same
// version (a replica joining `holders`) carry it explicitly.
#ifndef TENSORD_SERVICE_CLUSTER_NAME_RECORD_H_
#define TENSORD_SERVICE_CLUSTER_NAME_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/cluster/kv_store.h"

namespace tensord {

// Most holders a record lists (the largest replica count, with room for
// nodes that took a copy over from a failed target).
inline constexpr size_t kMaxRecordHolders = 64;

struct NameRecord {
  std::string name;
  // The cluster-wide order of this version (see above); 0 in a record not
  // written yet.
  int64_t origin = 0;
  // The node that took the put.
  std::string writer;
  uint64_t total_bytes = 0;
  uint32_t crc32c = 0;
  // Nodes holding a durable copy, the writer first.
  std::vector<std::string> holders;
  // The atomic group this version was published in, empty when none.
  std::string group;
  // Unique to the put that wrote this version (its writer's process and a
  // counter): a writer whose commit went unanswered recognises its own
  // write by it.
  std::string put_id;
  // The key's mod_revision when read: what a compare-and-swap compares.
  int64_t mod_revision = 0;

  bool operator==(const NameRecord&) const = default;
};

std::string NameRecordPrefix(absl::string_view prefix);
std::string NameRecordKey(absl::string_view prefix, absl::string_view name);

// The value to write. `with_origin`: the origin is stored (a rewrite of a
// version already ordered); without, the write itself orders the version.
std::string EncodeNameRecord(const NameRecord& record, bool with_origin);

// Parses a record as etcd returned it. DATA_LOSS, naming the key, for a key
// or value tensord does not write; unknown JSON fields are ignored.
absl::StatusOr<NameRecord> DecodeNameRecord(absl::string_view prefix, const EtcdKeyValue& kv);

// Whether `value` (a record's stored text) sets its version's order: a
// write that stores no origin (what a cluster watch reports as a publish).
bool RecordValueOrdersAVersion(absl::string_view value);

// Whether `value` (a record's stored text) may name an atomic group: false
// means it surely does not, without parsing it.
bool RecordValueNamesAGroup(absl::string_view value);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_NAME_RECORD_H_
