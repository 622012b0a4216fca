// This process is a TLS client of the servers it starts, and gRPC's
// handshake threads may still be ending when the tests are done: as in
// tensord's main, OpenSSL must not be torn down under them at exit (see
// service/security/openssl_lifetime.h). A static initialiser, because
// gtest_main owns main() and OpenSSL's first initialisation decides.
#include "service/security/openssl_lifetime.h"

namespace tensord::testing {
namespace {

[[maybe_unused]] const bool kOpenSslKeptThroughExit = KeepOpenSslThroughExit().ok();

}  // namespace
}  // namespace tensord::testing
