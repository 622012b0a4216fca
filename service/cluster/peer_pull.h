// Copies a version another node holds into this node's registry: a Fetch
// of exactly that version (by its cluster order, or by the holder's version
// number for a cache name), written straight into a new registry buffer
// and checked against what the record said (size and CRC-32C), so a holder
// answering with anything else is never trusted.
#ifndef TENSORD_SERVICE_CLUSTER_PEER_PULL_H_
#define TENSORD_SERVICE_CLUSTER_PEER_PULL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/cluster/peer_channels.h"
#include "service/registry/filling_version.h"
#include "service/registry/registry.h"

namespace tensord {

// Which version to pull, from whom, and what it must be.
struct PullSource {
  std::string name;
  std::string node;     // the holder, for messages
  std::string address;  // where it serves (from the member list)
  // The version's cluster order (durable names): the holder serves its
  // copy only if its latest has this origin. 0: by `version` instead.
  int64_t origin = 0;
  uint64_t version = 0;  // the holder's number (cache names)
  uint64_t total_bytes = 0;
  uint32_t crc32c = 0;
};

// Blocks. The bytes in a buffer prepared with `retention`, checked and
// summed (pending.crc32c set), ready to publish; a device version on the
// holder comes as a host tensor. With `filling`, the attempt is announced
// to it and its watermark advanced as bytes are written (readers are
// passed them as they arrive); the caller ends it. NOT_FOUND when the holder no longer has
// that version; DATA_LOSS when it sent another; UNAVAILABLE or
// DEADLINE_EXCEEDED naming the holder when it could not be reached or
// stopped answering (PeerChannelOptions::stall_timeout).
absl::StatusOr<PendingVersion> PullVersion(PeerChannels& peers, Registry& registry,
                                           const PullSource& source, Retention retention,
                                           FillingVersion* filling = nullptr);

// The deadline a pull of `bytes` gets: room for a slow link, never less
// than a few seconds.
absl::Duration PullTimeout(uint64_t bytes);

}  // namespace tensord

#endif  // TENSORD_SERVICE_CLUSTER_PEER_PULL_H_
