#include "client/tensorctl/commands.h"

#include "absl/strings/str_cat.h"
#include "service/common/absl_view.h"

namespace tensord::tensorctl {

std::span<const OptionSpec> Options() {
  static const OptionSpec kOptions[] = {
      {kServerOption, "", OptionKind::kText, "ADDR",
       "server: host:port or unix:PATH (default: $TENSORD_SERVER, else localhost:50051)"},
      {kTlsCaOption, "", OptionKind::kText, "PEM",
       "use TLS, trusting this CA file (default: plaintext; the system roots with --tls-cert)"},
      {kTlsCertOption, "", OptionKind::kText, "PEM", "client certificate for mutual TLS"},
      {kTlsKeyOption, "", OptionKind::kText, "PEM", "private key of --tls-cert"},
      {kTokenOption, "", OptionKind::kText, "TOKEN",
       "bearer token for a server with --tokens-file (default: $TENSORD_TOKEN; prefer the "
       "variable, command lines are visible to other users)"},
      {kOutputOption, "-o", OptionKind::kText, "FILE",
       "file to write, replaced only once complete; '-' for standard output"},
      {kVersionOption, "", OptionKind::kCount, "N", "a specific version (default: the latest)"},
      {kOffsetOption, "", OptionKind::kByteSize, "BYTES",
       "first stored byte to fetch (e.g. 4096, 4KiB)"},
      {kLengthOption, "", OptionKind::kByteSize, "BYTES",
       "bytes to fetch from --offset (default: to the end)"},
      {kPrefixOption, "", OptionKind::kText, "P", "prepended to every tensor name loaded"},
      {kCacheOption, "", OptionKind::kFlag, "",
       "retention cache: the server may evict it, and snapshots skip it"},
      {kPinOption, "", OptionKind::kFlag, "", "retention pinned: never evicted, kept in snapshots"},
      {kDeviceOption, "", OptionKind::kText, "DEV",
       "where the server stores the tensor: cpu (default) or cuda:N (device N of its backend)"},
      {kAtomicOption, "", OptionKind::kFlag, "",
       "publish every tensor under one version at once, or none of them"},
      {kFromOption, "", OptionKind::kCount, "V",
       "watch the changes after version V (the position an earlier watch printed)"},
      {kExistingOption, "", OptionKind::kFlag, "",
       "first print the latest version of every matching name, then the changes"},
      {kCountOption, "", OptionKind::kCount, "N", "stop after N events"},
      {kForOption, "", OptionKind::kText, "DURATION", "stop after this long (e.g. 30s, 5m)"},
      {kReplicasOption, "", OptionKind::kCount, "N",
       "in a cluster: acknowledged once N nodes hold it (default: the server's "
       "--default-replicas)"},
      {kStreamsOption, "", OptionKind::kCount, "N",
       "remote get or put in N concurrent streams, 1..8 (default: chosen from the size and the "
       "cores)"},
      {kClusterOption, "", OptionKind::kFlag, "",
       "ls: the cluster's durable names (from etcd), with the node that took each put; watch: "
       "every node's durable changes (positions are etcd revisions); get-many --version N: N "
       "is a cluster group (put-many's 'cluster group N', or a cluster watch's version)"},
      {kHelpOption, "-h", OptionKind::kFlag, "", "show this text"},
  };
  return kOptions;
}

absl::StatusOr<uint32_t> StreamsOption(const Invocation& invocation) {
  if (!invocation.Has(kStreamsOption)) return 0;
  const uint64_t streams = invocation.Number(kStreamsOption);
  if (streams < 1 || streams > kMaxPutStreams) {
    return absl::InvalidArgumentError(
        absl::StrCat("--streams ", streams, " must be 1..", kMaxPutStreams));
  }
  return static_cast<uint32_t>(streams);
}

std::span<const std::string_view> GlobalOptions() {
  static const std::string_view kGlobal[] = {kServerOption, kTlsCaOption, kTlsCertOption,
                                             kTlsKeyOption, kTokenOption, kHelpOption};
  return kGlobal;
}

std::span<const CommandSpec> Commands() {
  static const CommandSpec kCommands[] = {
      {.name = "put",
       .arguments = "NAME FILE.npy",
       .summary = "publish a .npy file as a new version of NAME",
       .min_arguments = 2,
       .max_arguments = 2,
       .options = {kCacheOption, kPinOption, kDeviceOption, kReplicasOption, kStreamsOption},
       .run = RunPut},
      {.name = "get",
       .arguments = "NAME",
       .summary = "fetch NAME into a .npy file (written compact, C order)",
       .min_arguments = 1,
       .max_arguments = 1,
       .options = {kOutputOption, kVersionOption, kStreamsOption},
       .required_options = {kOutputOption},
       .run = RunGet},
      {.name = "get-raw",
       .arguments = "NAME",
       .summary = "fetch the stored bytes of NAME, or a range of them, as they are",
       .min_arguments = 1,
       .max_arguments = 1,
       .options = {kOutputOption, kVersionOption, kOffsetOption, kLengthOption},
       .required_options = {kOutputOption},
       .run = RunGetRaw},
      {.name = "stat",
       .arguments = "NAME",
       .summary = "show the metadata of one version of NAME",
       .min_arguments = 1,
       .max_arguments = 1,
       .options = {kVersionOption},
       .run = RunStat},
      {.name = "ls",
       .arguments = "[PREFIX]",
       .summary = "list the tensors whose names start with PREFIX",
       .min_arguments = 0,
       .max_arguments = 1,
       .options = {kClusterOption},
       .run = RunList},
      {.name = "rm",
       .arguments = "NAME",
       .summary = "remove NAME (with --version: only while that is its latest version)",
       .min_arguments = 1,
       .max_arguments = 1,
       .options = {kVersionOption},
       .run = RunRemove},
      {.name = "health",
       .arguments = "",
       .summary = "probe the server's gRPC health service; exit 0 only when SERVING",
       .min_arguments = 0,
       .max_arguments = 0,
       .run = RunHealth},
      {.name = "nodes",
       .arguments = "",
       .summary = "list the live members of the server's cluster (a single node lists none)",
       .min_arguments = 0,
       .max_arguments = 0,
       .run = RunNodes},
      {.name = "snapshot",
       .arguments = "",
       .summary = "make the server write its durable tensors to its --snapshot-dir now",
       .min_arguments = 0,
       .max_arguments = 0,
       .run = RunSnapshot},
      {.name = "load",
       .arguments = "FILE.safetensors",
       .summary = "publish every tensor of a .safetensors file",
       .min_arguments = 1,
       .max_arguments = 1,
       .options = {kPrefixOption},
       .run = RunLoad},
      {.name = "put-many",
       .arguments = "DIR|FILE.safetensors",
       .summary = "publish every .npy file under DIR (named by its path, less .npy) or every "
                  "tensor of a .safetensors file, many per call",
       .min_arguments = 1,
       .max_arguments = 1,
       .options = {kPrefixOption, kAtomicOption, kCacheOption, kPinOption},
       .run = RunPutMany},
      {.name = "get-many",
       .arguments = "PREFIX",
       .summary = "fetch every tensor whose name starts with PREFIX (with --version: of that "
                  "atomic group; with --cluster too, through any node of a cluster) into "
                  "DIR/NAME.npy, NAME less PREFIX",
       .min_arguments = 1,
       .max_arguments = 1,
       .options = {kOutputOption, kVersionOption, kClusterOption},
       .required_options = {kOutputOption},
       .run = RunGetMany},
      {.name = "watch",
       .arguments = "[PREFIX]",
       .summary = "print each change to names starting with PREFIX (published, deleted, "
                  "evicted) as it happens, in the server's order",
       .min_arguments = 0,
       .max_arguments = 1,
       .options = {kFromOption, kExistingOption, kCountOption, kForOption, kClusterOption},
       .run = RunWatch},
      // run is null: main() prints the usage text itself.
      {.name = "help", .summary = "show this text"},
  };
  return kCommands;
}

absl::Status WithContext(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(AsAbsl(context), ": ", status.message()));
}

}  // namespace tensord::tensorctl
