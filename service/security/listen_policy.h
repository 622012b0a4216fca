// Which listen addresses may serve without TLS: plaintext gRPC (and bearer
// tokens in the clear) is only acceptable where nobody else can listen in.
#ifndef TENSORD_SERVICE_SECURITY_LISTEN_POLICY_H_
#define TENSORD_SERVICE_SECURITY_LISTEN_POLICY_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tensord {

// True for "unix:PATH" and for host:port whose host is "localhost", an
// address in 127.0.0.0/8, "[::1]" or an IPv4-mapped loopback address.
bool IsLocalOnlyAddress(absl::string_view address);

// OK when `address` is local-only, or when `tls` or `allow_insecure_remote`;
// otherwise FAILED_PRECONDITION naming the address and both ways out.
absl::Status CheckPlaintextListener(absl::string_view address, bool tls,
                                    bool allow_insecure_remote);

}  // namespace tensord

#endif  // TENSORD_SERVICE_SECURITY_LISTEN_POLICY_H_
