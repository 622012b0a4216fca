// The value a node registers under <prefix>/nodes/<name> in etcd: a small
// JSON object, so operators can read it with `etcdctl get`.
#ifndef TENSORD_SERVICE_CLUSTER_NODE_RECORD_H_
#define TENSORD_SERVICE_CLUSTER_NODE_RECORD_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/common/cluster_view.h"

namespace tensord {

// Node names are what hostnames allow: 1..253 characters of [A-Za-z0-9._-],
// so a name is one etcd key segment. INVALID_ARGUMENT names the bad value.
absl::Status ValidateNodeName(absl::string_view name);

std::string EncodeNodeRecord(const ClusterMember& member);

// Parses what EncodeNodeRecord wrote (possibly by a newer tensord: unknown
// fields are ignored). DATA_LOSS, naming the key's value, when it is not
// such a record.
absl::StatusOr<ClusterMember> DecodeNodeRecord(absl::string_view text);

// `text`, cut to 80 bytes and "..." when longer: short enough to quote in
// an error message about a record (node or name) that is not tensord's.
std::string RecordExcerpt(absl::string_view text);

// DATA_LOSS for a key and value under tensord's prefix that tensord did not
// write: "<what> '<key>' = '<value>' is not one tensord writes: <why>",
// key and value cut as RecordExcerpt cuts them.
absl::Status NotWrittenByTensord(absl::string_view what, absl::string_view key,
                                 absl::string_view value, absl::string_view why);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_NODE_RECORD_H_
