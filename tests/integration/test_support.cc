#include "tests/integration/test_support.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "service/common/directory_entries.h"
#include "service/common/scoped_fd.h"

namespace tensord::testing {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::string Excerpt(const uint8_t* bytes, size_t size, size_t at) {
  std::string out;
  const size_t begin = at >= 4 ? at - 4 : 0;
  const size_t end = std::min(size, at + 4);
  for (size_t i = begin; i < end; ++i) {
    absl::StrAppend(&out, i == at ? "[" : "", absl::Hex(bytes[i], absl::kZeroPad2),
                    i == at ? "]" : "", " ");
  }
  return out;
}

}  // namespace

DLTensor HostTensor::dl() const {
  DLTensor tensor{};
  tensor.data = const_cast<uint8_t*>(storage.data()) + data_offset;
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = static_cast<int32_t>(shape.size());
  tensor.dtype = dtype;
  tensor.shape = shape.empty() ? nullptr : const_cast<int64_t*>(shape.data());
  tensor.strides = strides.empty() ? nullptr : const_cast<int64_t*>(strides.data());
  tensor.byte_offset = byte_offset;
  return tensor;
}

HostTensor CompactTensor(DLDataType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  HostTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.storage = std::move(bytes);
  // Zero-size tensors still hand the client a valid pointer.
  if (tensor.storage.empty()) tensor.storage.reserve(1);
  return tensor;
}

uint64_t NextRandom(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ULL;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::vector<uint8_t> PatternBytes(size_t size, uint64_t seed) {
  std::vector<uint8_t> bytes(size);
  uint64_t state = seed * 0xD1B54A32D192ED03ULL + 1;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const uint64_t word = SplitMix64(state);
    std::memcpy(bytes.data() + i, &word, 8);
  }
  if (i < size) {
    const uint64_t word = SplitMix64(state);
    std::memcpy(bytes.data() + i, &word, size - i);
  }
  return bytes;
}

size_t CompactBytes(DLDataType dtype, const std::vector<int64_t>& shape) {
  uint64_t numel = 1;
  for (int64_t extent : shape) numel *= static_cast<uint64_t>(extent);
  const uint64_t bits = numel * dtype.bits * dtype.lanes;
  return static_cast<size_t>((bits + 7) / 8);
}

::testing::AssertionResult BytesEqual(const void* actual, size_t actual_size, const void* expected,
                                      size_t expected_size) {
  if (actual_size != expected_size) {
    return ::testing::AssertionFailure()
           << "size " << actual_size << " bytes, expected " << expected_size;
  }
  if (actual_size == 0 || std::memcmp(actual, expected, actual_size) == 0) {
    return ::testing::AssertionSuccess();
  }
  const auto* a = static_cast<const uint8_t*>(actual);
  const auto* e = static_cast<const uint8_t*>(expected);
  size_t first = 0;
  while (a[first] == e[first]) ++first;
  size_t differing = 0;
  for (size_t i = first; i < actual_size; ++i) differing += a[i] != e[i];
  return ::testing::AssertionFailure()
         << differing << " of " << actual_size << " bytes differ; first at offset " << first
         << ": actual " << Excerpt(a, actual_size, first) << "expected "
         << Excerpt(e, expected_size, first);
}

::testing::AssertionResult StatusIs(const absl::Status& status, absl::StatusCode code,
                                    std::string_view substring) {
  // Debian's Abseil has its own string_view type.
  const absl::string_view message = status.message();
  if (status.code() == code &&
      message.find(absl::string_view(substring.data(), substring.size())) !=
          absl::string_view::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "status is " << status << "; expected code " << absl::StatusCodeToString(code)
         << " with a message containing '" << substring << "'";
}

::testing::AssertionResult GrpcStatusIs(const grpc::Status& status, grpc::StatusCode code,
                                        std::string_view substring) {
  if (status.error_code() == code && status.error_message().find(substring) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "status is "
         << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())) << ": '"
         << status.error_message() << "'; expected code "
         << absl::StatusCodeToString(static_cast<absl::StatusCode>(code))
         << " with a message containing '" << substring << "'";
}

std::string TransportParamName(const ::testing::TestParamInfo<Transport>& info) {
  return TransportName(info.param);
}

std::string TestTensorName(std::string_view stem) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = test == nullptr ? std::string(stem)
                                     : absl::StrCat(test->test_suite_name(), "/", test->name(), "/",
                                                    std::string(stem));
  // Parameterized test names may hold characters names do not allow.
  for (char& c : name) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' || c == '/' ||
                         c == '-';
    if (!allowed) c = '_';
  }
  return name;
}

size_t CountOpenFds(const std::string& proc_fd_dir) {
  size_t count = 0;
  const absl::Status listed = ForEachDirectoryEntry(proc_fd_dir, [&](absl::string_view) {
    ++count;
    return true;
  });
  return listed.ok() ? count : 0;
}

size_t CountMemfds(const std::string& proc_fd_dir) {
  size_t count = 0;
  const absl::Status listed = ForEachDirectoryEntry(proc_fd_dir, [&](absl::string_view name) {
    char target[256];
    const std::string link = absl::StrCat(proc_fd_dir, "/", name);
    const ssize_t length = ::readlink(link.c_str(), target, sizeof(target) - 1);
    if (length > 0 && std::string_view(target, length).starts_with("/memfd:")) ++count;
    return true;
  });
  return listed.ok() ? count : 0;
}

std::string MapsLineOf(const void* address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto target = reinterpret_cast<uintptr_t>(address);
  while (std::getline(maps, line)) {
    uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &begin, &end) == 2 && target >= begin &&
        target < end) {
      return line;
    }
  }
  return "";
}

size_t CountLines(const std::string& path, const std::string& needle) {
  std::ifstream file(path);
  size_t count = 0;
  for (std::string line; std::getline(file, line);) {
    if (needle.empty() || line.find(needle) != std::string::npos) ++count;
  }
  return count;
}

size_t CountOccurrences(absl::string_view text, absl::string_view needle) {
  if (needle.empty()) return 0;
  size_t count = 0;
  for (size_t at = text.find(needle); at != absl::string_view::npos;
       at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// The value of `key=` in the first log line that has `event`, or "".
std::string LogField(const std::string& log, absl::string_view event, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::StrContains(line, absl::StrCat(" event=", event, " "))) continue;
    for (absl::string_view field : absl::StrSplit(line, ' ')) {
      if (absl::ConsumePrefix(&field, absl::StrCat(key, "="))) return std::string(field);
    }
  }
  return "";
}

// GET http://`address``path` with HTTP/1.0 (the server closes when done);
// the body, or an error. Every wait is bounded.
absl::StatusOr<std::string> HttpGet(const std::string& address, const std::string& path) {
  const size_t colon = address.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
  }
  ScopedFd socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(port));
  target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(socket.get(), reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
    return absl::UnavailableError(absl::StrCat("connect to ", address, " failed"));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", address, "\r\n\r\n");
  if (::send(socket.get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError("sending the HTTP request failed");
  }
  std::string response;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline && response.size() < (64u << 20)) {
    pollfd readable{socket.get(), POLLIN, 0};
    if (::poll(&readable, 1, 1000) <= 0) continue;
    char buffer[16384];
    const ssize_t got = ::recv(socket.get(), buffer, sizeof(buffer), 0);
    if (got < 0) return absl::UnavailableError("reading the HTTP response failed");
    if (got == 0) {
      const size_t body = response.find("\r\n\r\n");
      if (!absl::StartsWith(response, "HTTP/1.") || body == std::string::npos) {
        return absl::DataLossError(absl::StrCat("not an HTTP response: ", response.substr(0, 200)));
      }
      if (!absl::StrContains(response.substr(0, response.find("\r\n")), " 200 ")) {
        return absl::UnavailableError(absl::StrCat("HTTP status line: ", response.substr(0, 100)));
      }
      return response.substr(body + 4);
    }
    response.append(buffer, static_cast<size_t>(got));
  }
  return absl::DeadlineExceededError("the HTTP response did not end in time");
}

}  // namespace tensord::testing
