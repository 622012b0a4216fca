#include "service/security/openssl_lifetime.h"

#include <openssl/crypto.h>

namespace tensord {

absl::Status KeepOpenSslThroughExit() {
  // OPENSSL_INIT_NO_ATEXIT is honoured only by the first initialisation.
  if (OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) != 1) {
    return absl::InternalError("OpenSSL could not be initialised (OPENSSL_init_crypto failed)");
  }
  return absl::OkStatus();
}

}  // namespace tensord
