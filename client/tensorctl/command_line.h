// tensorctl's command line: a subcommand, its positional arguments and
// --options, parsed against a table so that usage text and checks agree.
#ifndef TENSORD_CLIENT_TENSORCTL_COMMAND_LINE_H_
#define TENSORD_CLIENT_TENSORCTL_COMMAND_LINE_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/client.h"

namespace tensord::tensorctl {

enum class OptionKind {
  kFlag,      // no value
  kText,      // any string
  kCount,     // a decimal unsigned integer
  kByteSize,  // "4096", "4KiB", "1M" (ParseByteSize)
};

struct OptionSpec {
  std::string_view name;        // "--version"
  std::string_view short_name;  // "-o", or empty
  OptionKind kind;
  std::string_view value_name;  // "N", "FILE"; shown in usage
  std::string_view help;
};

struct Invocation;

struct CommandSpec {
  std::string_view name = {};
  std::string_view arguments = {};  // "NAME FILE.npy", "[PREFIX]"; shown in usage
  std::string_view summary = {};
  size_t min_arguments = 0;
  size_t max_arguments = 0;
  // Long names of the options this command takes beyond the global ones.
  std::vector<std::string_view> options = {};
  std::vector<std::string_view> required_options = {};
  // Null for commands main() handles itself (help).
  absl::Status (*run)(Client& client, const Invocation& invocation) = nullptr;
};

// A parsed command line. Option values are already checked against their
// kind, so commands read them without failing.
struct Invocation {
  const CommandSpec* command = nullptr;  // null only when `help` is set
  std::vector<std::string> arguments;
  bool help = false;  // --help / -h anywhere, or the help command

  bool Has(std::string_view option) const;
  // The value of a kText option, or `fallback` when absent.
  std::string Text(std::string_view option, std::string_view fallback = "") const;
  // The value of a kCount or kByteSize option, or `fallback` when absent.
  uint64_t Number(std::string_view option, uint64_t fallback = 0) const;

  // Keyed by long name.
  std::map<std::string, std::string, std::less<>> texts;
  std::map<std::string, uint64_t, std::less<>> numbers;
};

// Global options (`global_options`, e.g. --server, --help) are accepted with
// every command; others only with the commands that list them. Options may
// come before or after the command; "--" ends them. INVALID_ARGUMENT (a usage
// error) names the offending token. `arguments` excludes the program name.
absl::StatusOr<Invocation> ParseCommandLine(std::span<const std::string> arguments,
                                            std::span<const CommandSpec> commands,
                                            std::span<const OptionSpec> options,
                                            std::span<const std::string_view> global_options);

// The full usage text: every command with its synopsis, then every option.
std::string UsageText(std::span<const CommandSpec> commands, std::span<const OptionSpec> options);

}  // namespace tensord::tensorctl

#endif  // TENSORD_CLIENT_TENSORCTL_COMMAND_LINE_H_
