#include "client/tensorctl/command_line.h"

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/common/absl_view.h"
#include "service/common/byte_size.h"
#include "service/common/closest_name.h"

namespace tensord::tensorctl {
namespace {

// An option as it appeared, before the command it belongs to is known.
struct GivenOption {
  const OptionSpec* spec;
  std::string value;
};

const OptionSpec* FindOption(std::span<const OptionSpec> options, std::string_view token) {
  for (const OptionSpec& option : options) {
    if (token == option.name || (!option.short_name.empty() && token == option.short_name)) {
      return &option;
    }
  }
  return nullptr;
}

const CommandSpec* FindCommand(std::span<const CommandSpec> commands, std::string_view name) {
  for (const CommandSpec& command : commands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

bool Contains(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

absl::Status UsageError(std::string_view message) {
  return absl::InvalidArgumentError(AsAbsl(message));
}

// "; did you mean 'get'?" when a known name is near `typed`, else "".
std::string DidYouMean(std::string_view typed, std::span<const std::string_view> known) {
  std::optional<std::string_view> near = ClosestName(typed, known);
  return near ? absl::StrCat("; did you mean '", AsAbsl(*near), "'?") : std::string();
}

// "--version N" or "--output FILE", as a required option reads in usage.
std::string OptionWithValue(const OptionSpec& option) {
  if (option.kind == OptionKind::kFlag) return std::string(option.name);
  return absl::StrCat(AsAbsl(option.short_name.empty() ? option.name : option.short_name), " ",
                      AsAbsl(option.value_name));
}

// "get NAME -o FILE.npy [--version N]".
std::string Synopsis(const CommandSpec& command, std::span<const OptionSpec> options) {
  std::string synopsis(command.name);
  if (!command.arguments.empty()) absl::StrAppend(&synopsis, " ", AsAbsl(command.arguments));
  for (std::string_view name : command.options) {
    const OptionSpec* option = FindOption(options, name);
    if (option == nullptr) continue;
    if (Contains(command.required_options, name)) {
      absl::StrAppend(&synopsis, " ", OptionWithValue(*option));
    } else {
      absl::StrAppend(&synopsis, " [", AsAbsl(option->name),
                      option->kind == OptionKind::kFlag ? "" : " ", AsAbsl(option->value_name),
                      "]");
    }
  }
  return synopsis;
}

// Splits the tokens into options (with values) and positionals.
absl::Status SplitTokens(std::span<const std::string> arguments,
                         std::span<const OptionSpec> options, std::vector<GivenOption>& given,
                         std::vector<std::string>& positionals) {
  bool options_ended = false;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const std::string& token = arguments[i];
    if (options_ended || token.size() < 2 || token[0] != '-') {
      positionals.push_back(token);  // "-" alone is a value, e.g. -o -
      continue;
    }
    if (token == "--") {
      options_ended = true;
      continue;
    }
    std::string_view name = token;
    std::optional<std::string> value;
    if (absl::StartsWith(token, "--")) {
      if (size_t equals = token.find('='); equals != std::string::npos) {
        name = std::string_view(token).substr(0, equals);
        value = token.substr(equals + 1);
      }
    } else if (token.size() > 2) {  // "-oFILE"
      name = std::string_view(token).substr(0, 2);
      value = token.substr(2);
    }
    const OptionSpec* option = FindOption(options, name);
    if (option == nullptr) {
      std::vector<std::string_view> names;
      for (const OptionSpec& known : options) names.push_back(known.name);
      return UsageError(
          absl::StrCat("unknown option '", AsAbsl(name), "'", DidYouMean(name, names)));
    }
    if (option->kind == OptionKind::kFlag) {
      if (value)
        return UsageError(absl::StrCat("option ", AsAbsl(option->name), " takes no value"));
      given.push_back({option, ""});
      continue;
    }
    if (!value) {
      if (i + 1 == arguments.size()) {
        return UsageError(
            absl::StrCat("option ", AsAbsl(name), " needs a value ", AsAbsl(option->value_name)));
      }
      value = arguments[++i];
    }
    given.push_back({option, std::move(*value)});
  }
  return absl::OkStatus();
}

// Checks `option` applies to `command` and stores its value by kind.
absl::Status StoreOption(const CommandSpec& command, const GivenOption& option,
                         std::span<const std::string_view> global_options, Invocation& invocation) {
  const std::string_view name = option.spec->name;
  if (!Contains(global_options, name) && !Contains(command.options, name)) {
    return UsageError(
        absl::StrCat(AsAbsl(command.name), ": option ", AsAbsl(name), " does not apply"));
  }
  if (invocation.Has(name)) {
    return UsageError(
        absl::StrCat(AsAbsl(command.name), ": option ", AsAbsl(name), " given more than once"));
  }
  switch (option.spec->kind) {
    case OptionKind::kFlag:
    case OptionKind::kText: invocation.texts.emplace(name, option.value); return absl::OkStatus();
    case OptionKind::kCount: {
      uint64_t number = 0;
      // SimpleAtoi alone would accept "+3" and " 3".
      const bool digits_only =
          !option.value.empty() && std::all_of(option.value.begin(), option.value.end(),
                                               [](char c) { return absl::ascii_isdigit(c); });
      if (!digits_only || !absl::SimpleAtoi(option.value, &number)) {
        return UsageError(absl::StrCat(AsAbsl(command.name), ": ", AsAbsl(name), " '", option.value,
                                       "' is not a non-negative integer"));
      }
      invocation.numbers.emplace(name, number);
      return absl::OkStatus();
    }
    case OptionKind::kByteSize: {
      absl::StatusOr<uint64_t> bytes = ParseByteSize(option.value);
      if (!bytes.ok()) {
        return UsageError(
            absl::StrCat(AsAbsl(command.name), ": ", AsAbsl(name), ": ", bytes.status().message()));
      }
      invocation.numbers.emplace(name, *bytes);
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unhandled option kind");
}

}  // namespace

bool Invocation::Has(std::string_view option) const {
  return texts.find(option) != texts.end() || numbers.find(option) != numbers.end();
}

std::string Invocation::Text(std::string_view option, std::string_view fallback) const {
  auto it = texts.find(option);
  return std::string(it == texts.end() ? fallback : std::string_view(it->second));
}

uint64_t Invocation::Number(std::string_view option, uint64_t fallback) const {
  auto it = numbers.find(option);
  return it == numbers.end() ? fallback : it->second;
}

absl::StatusOr<Invocation> ParseCommandLine(std::span<const std::string> arguments,
                                            std::span<const CommandSpec> commands,
                                            std::span<const OptionSpec> options,
                                            std::span<const std::string_view> global_options) {
  Invocation invocation;
  // --help wins over any other mistake on the line: the user is asking how.
  for (const std::string& token : arguments) {
    if (token == "--") break;
    const OptionSpec* option = FindOption(options, token);
    if (option != nullptr && option->kind == OptionKind::kFlag && option->name == "--help") {
      invocation.help = true;
      return invocation;
    }
  }
  std::vector<GivenOption> given;
  std::vector<std::string> positionals;
  if (absl::Status split = SplitTokens(arguments, options, given, positionals); !split.ok()) {
    return split;
  }

  if (positionals.empty()) return UsageError("no command given");
  invocation.command = FindCommand(commands, positionals.front());
  if (invocation.command == nullptr) {
    std::vector<std::string_view> names;
    for (const CommandSpec& known : commands) names.push_back(known.name);
    return UsageError(absl::StrCat("unknown command '", positionals.front(), "'",
                                   DidYouMean(positionals.front(), names)));
  }
  const CommandSpec& command = *invocation.command;
  if (command.run == nullptr) {  // help
    invocation.help = true;
    return invocation;
  }
  invocation.arguments.assign(positionals.begin() + 1, positionals.end());
  if (invocation.arguments.size() < command.min_arguments) {
    return UsageError(absl::StrCat(AsAbsl(command.name), ": missing arguments; usage: tensorctl ",
                                   Synopsis(command, options)));
  }
  if (invocation.arguments.size() > command.max_arguments) {
    return UsageError(absl::StrCat(AsAbsl(command.name), ": unexpected argument '",
                                   invocation.arguments[command.max_arguments], "'"));
  }
  for (const GivenOption& option : given) {
    if (absl::Status stored = StoreOption(command, option, global_options, invocation);
        !stored.ok()) {
      return stored;
    }
  }
  for (std::string_view name : command.required_options) {
    if (invocation.Has(name)) continue;
    const OptionSpec* option = FindOption(options, name);
    return UsageError(absl::StrCat(AsAbsl(command.name), ": missing ",
                                   option ? OptionWithValue(*option) : std::string(name)));
  }
  return invocation;
}

std::string UsageText(std::span<const CommandSpec> commands, std::span<const OptionSpec> options) {
  std::string text =
      "Usage: tensorctl [--server ADDR] COMMAND [ARGUMENTS] [OPTIONS]\n"
      "       tensorctl --version   (tensorctl's version, git commit, CUDA)\n"
      "\n"
      "Puts, fetches and inspects named tensors on a tensord server.\n"
      "\n"
      "Commands:\n";
  for (const CommandSpec& command : commands) {
    absl::StrAppend(&text, "  ", Synopsis(command, options), "\n      ", AsAbsl(command.summary),
                    "\n");
  }
  absl::StrAppend(&text, "\nOptions:\n");
  for (const OptionSpec& option : options) {
    std::string names = option.short_name.empty()
                            ? absl::StrCat("    ", AsAbsl(option.name))
                            : absl::StrCat(AsAbsl(option.short_name), ", ", AsAbsl(option.name));
    if (option.kind != OptionKind::kFlag) absl::StrAppend(&names, " ", AsAbsl(option.value_name));
    absl::StrAppendFormat(&text, "  %-20s %s\n", names, option.help);
  }
  absl::StrAppend(&text,
                  "\nOptions may come before or after the command; '--' ends them.\n"
                  "Exit status: 0 on success, 1 when the command fails, 2 on a usage error.\n");
  return text;
}

}  // namespace tensord::tensorctl
