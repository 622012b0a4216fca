// OpenSSL's process-wide state across exit.
#ifndef TENSORD_SERVICE_SECURITY_OPENSSL_LIFETIME_H_
#define TENSORD_SERVICE_SECURITY_OPENSSL_LIFETIME_H_

#include "absl/status/status.h"

namespace tensord {

// By default OpenSSL's first initialisation registers an atexit handler
// (OPENSSL_cleanup) that deletes its thread-local keys. gRPC runs TLS on its
// own threads, and some of them are still ending when main returns: one that
// ends after that handler has run never frees its error queue (904 bytes,
// which LeakSanitizer reports), and one still in a handshake would use
// freed state. Calling this before anything initialises OpenSSL drops the
// handler: thread state is freed as each thread ends, and what remains at
// exit goes with the process. Call it first thing in main; from a library
// it would change the host program's OpenSSL. It cannot take back a handler
// that an earlier initialisation registered.
absl::Status KeepOpenSslThroughExit();

}  // namespace tensord

#endif  // TENSORD_SERVICE_SECURITY_OPENSSL_LIFETIME_H_
