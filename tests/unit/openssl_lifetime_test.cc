#include "service/security/openssl_lifetime.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace tensord {
namespace {

// Registered before OpenSSL's own exit handler would be, so it runs after
// it: by then a gRPC thread that ended late has either freed its error
// queue or leaked it, and OpenSSL either still works or has been torn down.
void CheckOpenSslAtExit() {
  absl::SleepFor(absl::Milliseconds(300));  // the late thread ends meanwhile
  ERR_raise(ERR_LIB_SSL, SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE);
  const unsigned long recorded = ERR_peek_error();
  ERR_clear_error();
  if (recorded == 0) _exit(3);  // OpenSSL was cleaned up under its users
}

// What a gRPC handshake thread does: it fails a handshake (the error goes
// into its thread's OpenSSL error queue) and ends while exit handlers run.
void FailAHandshakeThenEndLate() {
  ERR_raise(ERR_LIB_SSL, SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE);
  ERR_clear_error();
  absl::SleepFor(absl::Milliseconds(100));
}

// Run by OpenSslLifetimeTest in a fresh process (this binary, exec'd
// again): OpenSSL's first initialisation decides, and other tests in this
// process have initialised it already.
// The child's own exit code: 0 would also be gtest's when it ran no test.
constexpr int kChildDone = 42;
// Set for the control child, which leaves OpenSSL's exit handler in place.
constexpr char kWithoutKeepVariable[] = "TENSORD_OPENSSL_CHILD_WITHOUT_KEEP";

TEST(OpenSslLifetimeChild, DISABLED_ExitsWhileAThreadThatUsedOpenSslEnds) {
  std::atexit(CheckOpenSslAtExit);
  if (std::getenv(kWithoutKeepVariable) == nullptr && !KeepOpenSslThroughExit().ok()) _exit(4);
  OPENSSL_init_ssl(0, nullptr);  // as gRPC does at its first TLS credentials
  std::thread(FailAHandshakeThenEndLate).detach();
  std::exit(kChildDone);
}

// Runs the child in a fresh process; its exit code.
int RunChild(bool keep_openssl) {
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    if (!keep_openssl) setenv(kWithoutKeepVariable, "1", 1);
    execl("/proc/self/exe", "openssl_lifetime_child", "--gtest_filter=OpenSslLifetimeChild.*",
          "--gtest_also_run_disabled_tests", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Under LeakSanitizer a leaked error queue fails the child at exit as well.
TEST(OpenSslLifetimeTest, OpenSslOutlivesThreadsThatEndAfterMainReturns) {
  EXPECT_EQ(RunChild(/*keep_openssl=*/true), kChildDone)
      << "3: OpenSSL was cleaned up while exit handlers ran; 4: it could not be initialised; "
         "23: LeakSanitizer found a leak";
}

// The control: without the call the child sees OpenSSL torn down, so the
// test above would catch a KeepOpenSslThroughExit that did nothing.
TEST(OpenSslLifetimeTest, WithoutItOpenSslIsGoneWhileExitHandlersRun) {
  EXPECT_EQ(RunChild(/*keep_openssl=*/false), 3);
}

}  // namespace
}  // namespace tensord
