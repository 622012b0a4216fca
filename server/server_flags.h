// tensord's flags turned into what server/main.cc composes: every value
// checked, nothing opened, bound or started. The flags themselves are
// defined in server_flags.cc; command_line.cc groups them for --help and
// sets them from the command line and the environment.
#ifndef TENSORD_SERVER_SERVER_FLAGS_H_
#define TENSORD_SERVER_SERVER_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/device_selection.h"
#include "service/cluster/cluster_config.h"
#include "service/common/log.h"
#include "service/transport/tensor_server.h"

namespace tensord {

// The name of the file that defines tensord's flags, as Abseil records it:
// --help and the command-line checks list only the flags defined there.
inline constexpr std::string_view kServerFlagsFile = "server/server_flags.cc";

struct TensordConfig {
  // Everything but the device backend (opened from `devices`) and the
  // cluster (joined from `cluster`); the handoff socket path is the flag's
  // ("auto" is resolved by main, since it makes a private directory).
  ServerOptions server;
  std::string handoff_socket_flag;
  DeviceSelection devices;
  LogLevel log_level = LogLevel::kInfo;
  // Set when --etcd-endpoints is; `advertise_address` is the flag's value.
  std::optional<ClusterConfig> cluster;
  std::string advertise_address;
  std::string preload;
  std::string preload_prefix;
  std::string metrics_listen;
  std::string ready_file;
};

// The flags' values (already parsed from the command line and environment)
// as a checked configuration. INVALID_ARGUMENT names the
// flag and its value for anything malformed or contradictory; reads the
// files flags name (PEMs, tokens, etcd password).
absl::StatusOr<TensordConfig> OptionsFromFlags();

}  // namespace tensord

#endif  // TENSORD_SERVER_SERVER_FLAGS_H_
