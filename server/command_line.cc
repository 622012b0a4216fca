#include "server/command_line.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "server/server_flags.h"
#include "service/common/absl_view.h"
#include "service/common/closest_name.h"
#include "service/common/status_macros.h"

namespace tensord {
namespace {

constexpr size_t kHelpWidth = 78;
constexpr std::string_view kHelpIndent = "      ";

bool IsServerFlag(const absl::CommandLineFlag& flag) {
  return absl::EndsWith(flag.Filename(), AsAbsl(kServerFlagsFile));
}

// `text` as indented lines of at most kHelpWidth columns.
std::string Wrapped(std::string_view text) {
  std::string out;
  std::string line(kHelpIndent);
  for (absl::string_view word : absl::StrSplit(AsAbsl(text), ' ', absl::SkipEmpty())) {
    if (line.size() > kHelpIndent.size() && line.size() + 1 + word.size() > kHelpWidth) {
      absl::StrAppend(&out, line, "\n");
      line = std::string(kHelpIndent);
    }
    if (line.size() > kHelpIndent.size()) line += ' ';
    absl::StrAppend(&line, word);
  }
  if (line.size() > kHelpIndent.size()) absl::StrAppend(&out, line, "\n");
  return out;
}

// The environment variable of `flag` (Abseil's underscore name).
std::string VariableOf(std::string_view flag) {
  return absl::StrCat("TENSORD_", absl::AsciiStrToUpper(AsAbsl(flag)));
}

// A flag's --help entry; its variable is named here, from the table's rule,
// not in each flag's help.
void AppendFlag(const absl::CommandLineFlag& flag, std::string& text) {
  absl::StrAppend(&text, "  --", DashedFlagName(AsStd(flag.Name())));
  const std::string default_value = flag.DefaultValue();
  if (!default_value.empty()) absl::StrAppend(&text, " (default ", default_value, ")");
  absl::StrAppend(
      &text, "\n",
      Wrapped(absl::StrCat(flag.Help(), " Env: ", VariableOf(AsStd(flag.Name())), ".")));
}

std::vector<std::string_view> KnownNames() {
  std::vector<std::string_view> names = {"help", "version"};
  for (const FlagGroup& group : ServerFlagGroups()) {
    names.insert(names.end(), group.flags.begin(), group.flags.end());
  }
  return names;
}

absl::CommandLineFlag* FindServerFlag(std::string_view name) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(AsAbsl(name));
  return flag != nullptr && IsServerFlag(*flag) ? flag : nullptr;
}

}  // namespace

std::span<const FlagGroup> ServerFlagGroups() {
  static const auto* const kGroups = new std::vector<FlagGroup>{
      {"Listening",
       {"listen", "handoff_socket", "handoff_allow_uid", "handoff_allow_gid", "metrics_listen",
        "ready_file"}},
      {"Connections",
       {"max_connections", "max_handoff_connections", "handshake_timeout",
        "connection_idle_timeout"}},
      {"Capacity",
       {"max_host_bytes", "max_tensor_bytes", "max_tensors", "max_leases_per_client",
        "eviction_high_watermark", "eviction_low_watermark", "huge_pages", "arena_max_tensor_bytes",
        "spare_put_bytes", "chunk_bytes", "max_message_bytes", "create_timeout", "max_watches",
        "watch_history"}},
      {"Snapshots and preload",
       {"snapshot_dir", "snapshot_ignore_corrupt", "preload", "preload_prefix"}},
      {"Security",
       {"tls_cert", "tls_key", "tls_client_ca", "allow_insecure_remote", "tokens_file",
        "max_concurrent_streams", "stream_idle_timeout"}},
      {"Devices",
       {"device_backend", "max_device_bytes", "simulated_devices", "simulated_legacy_ipc_only"}},
      {"Cluster",
       {"etcd_endpoints", "node_name", "advertise_address", "etcd_lease_ttl", "etcd_prefix",
        "etcd_ca", "etcd_cert", "etcd_key", "etcd_user", "etcd_password_file", "cluster_token_file",
        "cluster_ca", "cluster_tls_server_name", "default_replicas", "etcd_max_txn_ops",
        "etcd_compaction_interval"},
       "etcd_endpoints",
       "cluster flags need a cluster to join"},
      {"Logging and shutdown", {"log_level", "shutdown_grace"}},
  };
  return *kGroups;
}

std::string DashedFlagName(std::string_view flag) {
  return absl::StrReplaceAll(AsAbsl(flag), {{"_", "-"}});
}

std::string ServerHelpText() {
  std::string text =
      "tensord serves named tensors over gRPC and hands them zero-copy to clients on the\n"
      "same host (memfds and device handles over a Unix socket).\n"
      "\n"
      "Usage: tensord [--listen=127.0.0.1:50051] [--max-host-bytes=8GiB] [FLAGS]\n"
      "       tensord --help | --version\n"
      "\n"
      "Every flag may also come from the environment as TENSORD_<NAME>\n"
      "(TENSORD_MAX_HOST_BYTES=8GiB); a flag on the command line replaces its\n"
      "variable. Byte sizes take K/M/G/T suffixes (binary), durations s/m/h.\n";
  absl::flat_hash_set<std::string> listed;
  for (const FlagGroup& group : ServerFlagGroups()) {
    absl::StrAppend(&text, "\n", AsAbsl(group.title), ":\n");
    for (std::string_view name : group.flags) {
      const absl::CommandLineFlag* flag = FindServerFlag(name);
      if (flag == nullptr) continue;  // a name without a flag: the test catches it
      AppendFlag(*flag, text);
      listed.insert(std::string(name));
    }
  }
  std::vector<const absl::CommandLineFlag*> others;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsServerFlag(*flag) && !listed.contains(std::string(name))) others.push_back(flag);
  }
  if (!others.empty()) {
    std::sort(others.begin(), others.end(),
              [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
    absl::StrAppend(&text, "\nOther:\n");
    for (const absl::CommandLineFlag* flag : others) AppendFlag(*flag, text);
  }
  absl::StrAppend(&text,
                  "\nInformation:\n"
                  "  --help, -h\n",
                  Wrapped("Show this text and exit."), "  --version\n",
                  Wrapped("Show the version, the git commit and whether the CUDA backend is "
                          "built in, and exit."));
  return text;
}

namespace {

// Checks `arguments` (flag names already in Abseil's underscore spelling):
// INVALID_ARGUMENT naming an unknown flag (with the nearest known one) or a
// stray positional argument. --help/-h wins over any mistake, then
// --version.
absl::Status CheckServerArguments(std::span<const std::string> arguments,
                                  CommandLineRequest& request) {
  request = CommandLineRequest::kServe;
  absl::Status first_error;
  const std::vector<std::string_view> known = KnownNames();
  for (size_t i = 0; i < arguments.size(); ++i) {
    absl::string_view argument = arguments[i];
    if (argument == "--") {
      if (first_error.ok() && i + 1 < arguments.size()) {
        first_error = absl::InvalidArgumentError(
            absl::StrCat("unexpected argument '", arguments[i + 1], "': tensord takes only flags"));
      }
      break;
    }
    if (!absl::ConsumePrefix(&argument, "--") && !absl::ConsumePrefix(&argument, "-")) {
      if (first_error.ok()) {
        first_error = absl::InvalidArgumentError(
            absl::StrCat("unexpected argument '", argument, "': tensord takes only flags"));
      }
      continue;
    }
    const size_t equals = argument.find('=');
    const std::string_view name = AsStd(argument.substr(0, equals));
    const bool has_value = equals != absl::string_view::npos;
    if (name == "help" || name == "h") {
      request = CommandLineRequest::kHelp;
      return absl::OkStatus();
    }
    if (name == "version") {
      request = CommandLineRequest::kVersion;
      continue;
    }
    const absl::CommandLineFlag* flag = FindServerFlag(name);
    if (flag == nullptr && name.starts_with("no")) {
      // Abseil's --noflag spelling of --flag=false.
      const absl::CommandLineFlag* negated = FindServerFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>() && !has_value) continue;
    }
    if (flag == nullptr) {
      if (!first_error.ok()) continue;
      std::string message = absl::StrCat("unknown flag --", DashedFlagName(name));
      if (std::optional<std::string_view> near = ClosestName(name, known)) {
        absl::StrAppend(&message, "; did you mean --", DashedFlagName(*near), "?");
      }
      first_error = absl::InvalidArgumentError(message);
      continue;
    }
    // "--flag value": a non-boolean flag without '=' takes the next argument.
    if (!has_value && !flag->IsOfType<bool>()) ++i;
  }
  if (request == CommandLineRequest::kVersion) return absl::OkStatus();
  return first_error;
}

// True when `arguments` (as typed) give `flag` (Abseil's underscore name)
// in any spelling: --flag=v, --flag v, -flag, dashes or underscores,
// --noflag. Stops at "--".
bool CommandLineGivesFlag(std::span<char* const> arguments, std::string_view flag) {
  for (size_t i = 0; i < arguments.size(); ++i) {
    absl::string_view argument = arguments[i];
    if (argument == "--") break;
    if (!absl::ConsumePrefix(&argument, "--") && !absl::ConsumePrefix(&argument, "-")) continue;
    const size_t equals = argument.find('=');
    const std::string name = absl::StrReplaceAll(argument.substr(0, equals), {{"-", "_"}});
    if (name == flag || (name.starts_with("no") && std::string_view(name).substr(2) == flag)) {
      return true;
    }
    // "--other value": the value is not a flag, even when it starts with '-'.
    const absl::CommandLineFlag* other = FindServerFlag(name);
    if (other != nullptr && !other->IsOfType<bool>() && equals == absl::string_view::npos) ++i;
  }
  return false;
}

// TENSORD_<FLAG> for every flag the command line does not give. Coming
// first would not be enough, since --listen gathers every occurrence (an
// image's own TENSORD_LISTEN would be served beside the user's --listen).
std::vector<std::string> ArgumentsFromEnvironment(std::span<char* const> command_line) {
  std::vector<std::string> arguments;
  for (const FlagGroup& group : ServerFlagGroups()) {
    for (std::string_view flag : group.flags) {
      if (CommandLineGivesFlag(command_line, flag)) continue;
      if (const char* value = std::getenv(VariableOf(flag).c_str()); value != nullptr) {
        arguments.push_back(absl::StrCat("--", AsAbsl(flag), "=", value));
      }
    }
  }
  return arguments;
}

// Abseil spells flags with underscores; the dashed spelling is tensord's.
void UnderscoreFlagNames(std::vector<std::string>& arguments) {
  for (std::string& argument : arguments) {
    if (argument == "--") break;
    if (argument.size() < 2 || argument[0] != '-') continue;
    const size_t prefix = argument[1] == '-' ? 2 : 1;
    const size_t end = std::min(argument.find('='), argument.size());
    std::replace(argument.begin() + prefix, argument.begin() + end, '-', '_');
  }
}

// Sets each flag `arguments` give (CheckServerArguments accepted them):
// --flag=v, --flag v, a boolean's --flag and --noflag. --listen's
// occurrences are gathered into one value.
absl::Status SetFlags(const std::vector<std::string>& arguments) {
  std::vector<std::string> listen;
  for (size_t i = 0; i < arguments.size(); ++i) {
    absl::string_view argument = arguments[i];
    if (argument == "--") break;
    if (!absl::ConsumePrefix(&argument, "--")) absl::ConsumePrefix(&argument, "-");
    const size_t equals = argument.find('=');
    const std::string_view name = AsStd(argument.substr(0, equals));
    absl::CommandLineFlag* flag = FindServerFlag(name);
    bool negated = false;
    if (flag == nullptr && name.starts_with("no")) {
      flag = FindServerFlag(name.substr(2));
      negated = true;
    }
    if (flag == nullptr) continue;  // --version: CheckServerArguments answered it
    std::string value;
    if (equals != absl::string_view::npos) {
      value = std::string(argument.substr(equals + 1));
    } else if (flag->IsOfType<bool>()) {
      value = negated ? "false" : "true";
    } else if (i + 1 < arguments.size()) {
      value = arguments[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", DashedFlagName(name), " needs a value"));
    }
    if (name == "listen") {
      for (absl::string_view address : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        listen.emplace_back(address);
      }
      continue;
    }
    if (std::string error; !flag->ParseFrom(value, &error)) {
      // Abseil's message names the flag in underscores; say why, or what
      // its default looks like.
      std::string why =
          absl::StrCat("not a valid value (the default is ", flag->DefaultValue(), ")");
      if (const size_t cut = error.find("; "); cut != std::string::npos)
        why = error.substr(cut + 2);
      return absl::InvalidArgumentError(
          absl::StrCat("--", DashedFlagName(name), "=", value, ": ", why));
    }
  }
  if (!listen.empty()) {
    std::string error;
    if (!FindServerFlag("listen")->ParseFrom(absl::StrJoin(listen, ","), &error)) {
      return absl::InvalidArgumentError(absl::StrCat("--listen: ", error));
    }
  }
  return absl::OkStatus();
}

// A group's flags without the flag the group needs would do nothing.
absl::Status CheckGroupsHaveWhatTheyNeed() {
  for (const FlagGroup& group : ServerFlagGroups()) {
    if (group.needs.empty()) continue;
    const absl::CommandLineFlag* needed = FindServerFlag(group.needs);
    if (needed->CurrentValue() != needed->DefaultValue()) continue;
    for (std::string_view name : group.flags) {
      const absl::CommandLineFlag* flag = FindServerFlag(name);
      if (name == group.needs || flag == nullptr) continue;
      if (flag->CurrentValue() != flag->DefaultValue()) {
        return absl::InvalidArgumentError(absl::StrCat("--", DashedFlagName(name), " is set but --",
                                                       DashedFlagName(group.needs),
                                                       " is not: ", AsAbsl(group.needs_why)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CommandLineRequest> ParseServerCommandLine(std::span<char* const> typed) {
  std::vector<std::string> arguments = ArgumentsFromEnvironment(typed);
  for (char* argument : typed) arguments.emplace_back(argument);
  UnderscoreFlagNames(arguments);
  CommandLineRequest request = CommandLineRequest::kServe;
  TENSORD_RETURN_IF_ERROR(CheckServerArguments(arguments, request));
  if (request != CommandLineRequest::kServe) return request;
  TENSORD_RETURN_IF_ERROR(SetFlags(arguments));
  TENSORD_RETURN_IF_ERROR(CheckGroupsHaveWhatTheyNeed());
  return CommandLineRequest::kServe;
}

}  // namespace tensord
