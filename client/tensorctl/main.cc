// tensorctl: the command-line tool of tensord. Parses the command line,
// connects, runs one command and turns its status into an exit code.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "client/tensorctl/command_line.h"
#include "client/tensorctl/commands.h"
#include "service/common/build_info.h"
#include "tensord/client.h"

namespace tensord::tensorctl {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

std::string ServerAddress(const Invocation& invocation) {
  if (invocation.Has(kServerOption)) return invocation.Text(kServerOption);
  const char* environment = std::getenv(std::string(kServerEnvironmentVariable).c_str());
  if (environment != nullptr && *environment != '\0') return environment;
  return std::string(kDefaultServer);
}

int Main(int argc, char** argv) {
  const std::vector<std::string> arguments(argv + 1, argv + argc);
  // Alone, --version is the program's (with a command it names a tensor's).
  if (arguments.size() == 1 && (arguments[0] == "--version" || arguments[0] == "version")) {
    std::printf("%s\n", VersionLine("tensorctl").c_str());
    return kExitOk;
  }
  absl::StatusOr<Invocation> invocation =
      ParseCommandLine(arguments, Commands(), Options(), GlobalOptions());
  if (!invocation.ok()) {
    absl::FPrintF(stderr, "tensorctl: %s\nRun 'tensorctl help' for usage.\n",
                  invocation.status().message());
    return kExitUsage;
  }
  if (invocation->help) {
    std::fputs(UsageText(Commands(), Options()).c_str(), stdout);
    return kExitOk;
  }
  const CommandSpec& command = *invocation->command;

  // tensorctl moves whole tensors: gRPC's receive buffers are kept for the
  // next message instead of being faulted in again.
  TuneMallocForTransfers();
  ClientOptions options;
  options.server = ServerAddress(*invocation);
  options.tls_root_ca = invocation->Text(kTlsCaOption);
  options.tls_client_cert = invocation->Text(kTlsCertOption);
  options.tls_client_key = invocation->Text(kTlsKeyOption);
  options.bearer_token = invocation->Text(kTokenOption);
  if (const char* token = std::getenv(std::string(kTokenEnvironmentVariable).c_str());
      options.bearer_token.empty() && token != nullptr) {
    options.bearer_token = token;
  }
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  if (!client.ok()) {
    absl::FPrintF(stderr, "tensorctl: %s: connect to %s: %s\n", command.name, options.server,
                  client.status().message());
    return kExitFailure;
  }
  const absl::Status status = command.run(**client, *invocation);
  // Whatever the command printed reaches stdout before the error does.
  std::fflush(stdout);
  if (!status.ok()) {
    absl::FPrintF(stderr, "tensorctl: %s: %s\n", command.name, status.message());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace
}  // namespace tensord::tensorctl

int main(int argc, char** argv) { return tensord::tensorctl::Main(argc, argv); }
