// tensorctl's commands: the table main() parses against, and one Run
// function per command. Each Run function prints its result to stdout and
// returns the error to report otherwise.
#ifndef TENSORD_CLIENT_TENSORCTL_COMMANDS_H_
#define TENSORD_CLIENT_TENSORCTL_COMMANDS_H_

#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/tensorctl/command_line.h"
#include "tensord/client.h"

namespace tensord::tensorctl {

inline constexpr std::string_view kServerOption = "--server";
inline constexpr std::string_view kTlsCaOption = "--tls-ca";
inline constexpr std::string_view kTlsCertOption = "--tls-cert";
inline constexpr std::string_view kTlsKeyOption = "--tls-key";
inline constexpr std::string_view kTokenOption = "--token";
inline constexpr std::string_view kTokenEnvironmentVariable = "TENSORD_TOKEN";
inline constexpr std::string_view kHelpOption = "--help";
inline constexpr std::string_view kOutputOption = "--output";
inline constexpr std::string_view kVersionOption = "--version";
inline constexpr std::string_view kOffsetOption = "--offset";
inline constexpr std::string_view kLengthOption = "--length";
inline constexpr std::string_view kPrefixOption = "--prefix";
inline constexpr std::string_view kCacheOption = "--cache";
inline constexpr std::string_view kPinOption = "--pin";
inline constexpr std::string_view kDeviceOption = "--device";
inline constexpr std::string_view kAtomicOption = "--atomic";
inline constexpr std::string_view kFromOption = "--from";
inline constexpr std::string_view kExistingOption = "--existing";
inline constexpr std::string_view kCountOption = "--count";
inline constexpr std::string_view kForOption = "--for";
inline constexpr std::string_view kReplicasOption = "--replicas";
inline constexpr std::string_view kStreamsOption = "--streams";
inline constexpr std::string_view kClusterOption = "--cluster";

// Where --server falls back to: $TENSORD_SERVER, else this.
inline constexpr std::string_view kServerEnvironmentVariable = "TENSORD_SERVER";
inline constexpr std::string_view kDefaultServer = "localhost:50051";

// --streams N of get and put: 1..8 (INVALID_ARGUMENT naming N otherwise),
// 0 (the client's choice) when absent.
absl::StatusOr<uint32_t> StreamsOption(const Invocation& invocation);

std::span<const CommandSpec> Commands();
std::span<const OptionSpec> Options();
// Options every command accepts.
std::span<const std::string_view> GlobalOptions();

// put NAME FILE.npy (put_command.cc)
absl::Status RunPut(Client& client, const Invocation& invocation);
// get NAME -o FILE.npy, get-raw NAME -o FILE (get_commands.cc)
absl::Status RunGet(Client& client, const Invocation& invocation);
absl::Status RunGetRaw(Client& client, const Invocation& invocation);
// stat, ls, rm (catalog_commands.cc)
absl::Status RunStat(Client& client, const Invocation& invocation);
absl::Status RunList(Client& client, const Invocation& invocation);
absl::Status RunRemove(Client& client, const Invocation& invocation);
// load FILE.safetensors (load_command.cc)
absl::Status RunLoad(Client& client, const Invocation& invocation);

// put-many DIR|FILE.safetensors, get-many PREFIX -o DIR (batch_commands.cc)
absl::Status RunPutMany(Client& client, const Invocation& invocation);
absl::Status RunGetMany(Client& client, const Invocation& invocation);
// watch PREFIX (watch_command.cc)
absl::Status RunWatch(Client& client, const Invocation& invocation);
// health, snapshot (catalog_commands.cc)
absl::Status RunHealth(Client& client, const Invocation& invocation);
absl::Status RunSnapshot(Client& client, const Invocation& invocation);
absl::Status RunNodes(Client& client, const Invocation& invocation);

// `status` with "`context`: " before its message, code unchanged, so an error
// names the file or tensor it concerns.
absl::Status WithContext(const absl::Status& status, std::string_view context);

}  // namespace tensord::tensorctl

#endif  // TENSORD_CLIENT_TENSORCTL_COMMANDS_H_
