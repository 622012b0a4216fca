// A throwaway PKI (openssl CLI) for the TLS tests, in a TempDir
// (tests/process/child_process.h).
#ifndef TENSORD_TESTS_INTEGRATION_TEST_PKI_H_
#define TENSORD_TESTS_INTEGRATION_TEST_PKI_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/process/child_process.h"

namespace tensord::testing {

// Writes `contents` to `path` (a test failure when it cannot).
void WriteFile(const std::string& path, std::string_view contents);

// A CA that signs the server's certificate (for 127.0.0.1 and localhost)
// and a client certificate, and a second, unrelated CA with a client
// certificate of its own: ca.pem, server.{pem,key}, client.{pem,key},
// other-ca.pem, rogue-client.{pem,key}.
class TestPki {
 public:
  static absl::StatusOr<std::unique_ptr<TestPki>> Create();

  std::string Path(absl::string_view file) const { return dir_.File(file); }
  const TempDir& dir() const { return dir_; }

 private:
  TestPki() = default;
  absl::Status Run(const std::string& arguments);
  TempDir dir_;
};

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_INTEGRATION_TEST_PKI_H_
