#include "service/common/build_info.h"

#include "service/common/build_info_values.h"  // generated at build time

namespace tensord {

std::string_view ReleaseVersion() { return kBuildReleaseVersion; }
std::string_view GitCommit() { return kBuildGitCommit; }
bool CudaBuiltIn() { return kBuildCudaBuiltIn; }

std::string VersionLine(std::string_view program) {
  std::string line(program);
  line.append(" ").append(ReleaseVersion()).append(" (commit ").append(GitCommit());
  line.append(", CUDA backend ").append(CudaBuiltIn() ? "built in" : "not built in").append(")");
  return line;
}

}  // namespace tensord
