// tensord's command line: flags spelled with dashes or underscores, each
// also read from TENSORD_<NAME> unless the command line gives it, grouped
// --help and --version, unknown flags refused with the nearest known one
// named, and the flags of a group that needs another (the cluster's need
// --etcd-endpoints) refused without it. Values are set through Abseil's
// flag reflection; server_flags.cc defines the flags and reads them.
#ifndef TENSORD_SERVER_COMMAND_LINE_H_
#define TENSORD_SERVER_COMMAND_LINE_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tensord {

// One heading of --help and the flags under it (Abseil's underscore names).
struct FlagGroup {
  std::string_view title;
  std::vector<std::string_view> flags;
  // When set: the group's other flags do nothing without this one, so
  // giving any of them (a value other than its default) without it is an
  // error saying `needs_why`.
  std::string_view needs = {};
  std::string_view needs_why = {};
};

// Every flag tensord defines, grouped as --help shows them.
std::span<const FlagGroup> ServerFlagGroups();

// "max_host_bytes" -> "max-host-bytes".
std::string DashedFlagName(std::string_view flag);

// The --help text: usage, then each group's flags with their defaults and
// help. Flags defined in server/server_flags.cc but missing from the groups are
// listed under "Other" (a test keeps that heading from appearing).
std::string ServerHelpText();

// What the command line asks for besides serving.
enum class CommandLineRequest { kServe, kHelp, kVersion };

// Sets tensord's flags from `arguments` (argv without the program name, as
// typed) and from the TENSORD_* variables of the flags they do not give: a
// flag on the command line replaces its variable. --listen gathers every
// occurrence (repeated or comma-separated) where other flags keep their
// last. INVALID_ARGUMENT names an unknown flag (with the nearest known
// one), a stray argument, a value its flag cannot parse, or a flag given
// without the flag its group needs. With --help or --version nothing is
// set and the request says which; --help wins over any mistake.
absl::StatusOr<CommandLineRequest> ParseServerCommandLine(std::span<char* const> arguments);

}  // namespace tensord

#endif  // TENSORD_SERVER_COMMAND_LINE_H_
