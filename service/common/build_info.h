// What this binary is: the release, the git commit it was built from, and
// whether the CUDA backend is compiled in. For --version and GetServerInfo.
#ifndef TENSORD_SERVICE_COMMON_BUILD_INFO_H_
#define TENSORD_SERVICE_COMMON_BUILD_INFO_H_

#include <string>
#include <string_view>

namespace tensord {

// "0.1.0".
std::string_view ReleaseVersion();
// The short commit hash, with "-dirty" when the tree had local changes;
// "unknown" when built outside a git checkout (e.g. a source tarball).
std::string_view GitCommit();
bool CudaBuiltIn();

// "PROGRAM 0.1.0 (commit 5ab81f0, CUDA backend built in)".
std::string VersionLine(std::string_view program);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_BUILD_INFO_H_
