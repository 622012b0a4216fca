#include "tests/integration/test_pki.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tensord::testing {

void WriteFile(const std::string& path, std::string_view contents) {
  std::ofstream out(path, std::ios::trunc);
  out << contents;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

absl::StatusOr<std::unique_ptr<TestPki>> TestPki::Create() {
  auto pki = std::unique_ptr<TestPki>(new TestPki());
  if (pki->dir_.path().empty()) return absl::InternalError("mkdtemp failed");
  WriteFile(pki->dir_.File("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  WriteFile(pki->dir_.File("client.ext"), "extendedKeyUsage=clientAuth\n");
  for (const char* ca : {"ca", "other-ca"}) {
    if (absl::Status status = pki->Run(absl::StrCat(
            "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "
            "'/CN=tensord test ",
            ca, "' -keyout ", ca, ".key -out ", ca, ".pem"));
        !status.ok()) {
      return status;
    }
  }
  for (auto [name, ca, ext] :
       {std::tuple{"server", "ca", "server.ext"}, std::tuple{"client", "ca", "client.ext"},
        std::tuple{"rogue-client", "other-ca", "client.ext"}}) {
    if (absl::Status status = pki->Run(
            absl::StrCat("req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj '/CN=", name,
                         "' -keyout ", name, ".key -out ", name, ".csr"));
        !status.ok()) {
      return status;
    }
    if (absl::Status status = pki->Run(
            absl::StrCat("x509 -req -days 2 -in ", name, ".csr -CA ", ca, ".pem -CAkey ", ca,
                         ".key -CAcreateserial -extfile ", ext, " -out ", name, ".pem"));
        !status.ok()) {
      return status;
    }
  }
  return pki;
}

absl::Status TestPki::Run(const std::string& arguments) {
  const std::string command =
      absl::StrCat("cd '", dir_.path(), "' && openssl ", arguments, " >openssl.log 2>&1");
  const int status = std::system(command.c_str());
  if (status != 0) {
    std::ifstream log(dir_.File("openssl.log"));
    std::string output((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    return absl::InternalError(absl::StrCat("openssl ", arguments, " failed: ", output));
  }
  return absl::OkStatus();
}

}  // namespace tensord::testing
