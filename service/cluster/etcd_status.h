#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tensord {

// etcd's answer to one call as an absl::Status whose message names the call
// and the endpoint, with advice where etcd's own words hide the flag to
// change (a full backend quota, a transaction or request over etcd's limit).
//
// etcd answers UNKNOWN "context deadline exceeded" when the deadline that
// tensord sent with the call passes inside etcd (a slow disk or raft): that
// is a timeout like the client's own, so it comes back as DEADLINE_EXCEEDED;
// so does a connection that etcd took but did not answer within gRPC's
// connect timeout (a refused connection stays UNAVAILABLE).
absl::Status EtcdCallStatus(const grpc::Status& status, absl::string_view what,
                            absl::string_view endpoint);

// True when `status` (from EtcdCallStatus) means this endpoint could not
// answer in time (down, partitioned, no leader, too slow): another endpoint
// may.
bool IsEtcdEndpointFailure(const absl::Status& status);

}  // namespace tensord
