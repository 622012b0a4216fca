// tensord's command line around Abseil's flag parser: flags spelled with
// dashes, grouped --help and --version (both exit 0), and unknown flags
// refused with the nearest known one named, before Abseil sees them.
#ifndef TENSORD_SERVER_COMMAND_LINE_H_
#define TENSORD_SERVER_COMMAND_LINE_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace tensord {

// One heading of --help and the flags under it (Abseil's underscore names).
struct FlagGroup {
  std::string_view title;
  std::vector<std::string_view> flags;
};

// Every flag tensord defines, grouped as --help shows them.
std::span<const FlagGroup> ServerFlagGroups();

// "max_host_bytes" -> "max-host-bytes".
std::string DashedFlagName(std::string_view flag);

// The --help text: usage, then each group's flags with their defaults and
// help. Flags defined in server/main.cc but missing from the groups are
// listed under "Other" (a test keeps that heading from appearing).
std::string ServerHelpText();

// What the command line asks for besides serving.
enum class CommandLineRequest { kServe, kHelp, kVersion };

// Checks `arguments` (argv without the program name, flag names already in
// Abseil's underscore spelling): INVALID_ARGUMENT naming an unknown flag
// (with the nearest known one) or a stray positional argument. --help/-h
// wins over any mistake, then --version.
absl::Status CheckServerArguments(std::span<const std::string> arguments,
                                  CommandLineRequest& request);

// True when `arguments` (argv without the program name, as typed) give
// `flag` (Abseil's underscore name) in any spelling: --flag=v, --flag v,
// -flag, dashes or underscores, --noflag. Stops at "--".
bool CommandLineGivesFlag(std::span<char* const> arguments, std::string_view flag);

}  // namespace tensord

#endif  // TENSORD_SERVER_COMMAND_LINE_H_
