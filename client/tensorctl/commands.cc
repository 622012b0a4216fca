#include "client/tensorctl/commands.h"

#include "absl/strings/str_cat.h"
#include "client/tensorctl/absl_view.h"

namespace tensord::tensorctl {

std::span<const OptionSpec> Options() {
  static const OptionSpec kOptions[] = {
      {kServerOption, "", OptionKind::kText, "ADDR",
       "server: host:port or unix:PATH (default: $TENSORD_SERVER, else localhost:50051)"},
      {kOutputOption, "-o", OptionKind::kText, "FILE",
       "file to write, replaced only once complete; '-' for standard output"},
      {kVersionOption, "", OptionKind::kCount, "N", "a specific version (default: the latest)"},
      {kOffsetOption, "", OptionKind::kByteSize, "BYTES",
       "first stored byte to fetch (e.g. 4096, 4KiB)"},
      {kLengthOption, "", OptionKind::kByteSize, "BYTES",
       "bytes to fetch from --offset (default: to the end)"},
      {kPrefixOption, "", OptionKind::kText, "P", "prepended to every tensor name loaded"},
      {kHelpOption, "-h", OptionKind::kFlag, "", "show this text"},
  };
  return kOptions;
}

std::span<const std::string_view> GlobalOptions() {
  static const std::string_view kGlobal[] = {kServerOption, kHelpOption};
  return kGlobal;
}

std::span<const CommandSpec> Commands() {
  static const CommandSpec kCommands[] = {
      {"put", "NAME FILE.npy", "publish a .npy file as a new version of NAME", 2, 2, {}, {},
       RunPut},
      {"get", "NAME", "fetch NAME into a .npy file (written compact, C order)", 1, 1,
       {kOutputOption, kVersionOption}, {kOutputOption}, RunGet},
      {"get-raw", "NAME", "fetch the stored bytes of NAME, or a range of them, as they are", 1, 1,
       {kOutputOption, kVersionOption, kOffsetOption, kLengthOption}, {kOutputOption},
       RunGetRaw},
      {"stat", "NAME", "show the metadata of one version of NAME", 1, 1, {kVersionOption}, {},
       RunStat},
      {"ls", "[PREFIX]", "list the tensors whose names start with PREFIX", 0, 1, {}, {}, RunList},
      {"rm", "NAME", "remove NAME (with --version: only while that is its latest version)", 1, 1,
       {kVersionOption}, {}, RunRemove},
      {"load", "FILE.safetensors", "publish every tensor of a .safetensors file", 1, 1,
       {kPrefixOption}, {}, RunLoad},
      {"help", "", "show this text", 0, 0, {}, {}, nullptr},
  };
  return kCommands;
}

absl::Status WithContext(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(AsAbsl(context), ": ", status.message()));
}

}  // namespace tensord::tensorctl
