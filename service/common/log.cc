#include "service/common/log.h"
#include "absl/strings/string_view.h"

#include <unistd.h>

#include <atomic>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tensord {
namespace {

std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};

absl::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "unknown";
}

bool NeedsQuotes(absl::string_view value) {
  if (value.empty()) return true;
  for (char c : value) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) return true;
  }
  return false;
}

void AppendValue(std::string& line, absl::string_view value) {
  if (!NeedsQuotes(value)) {
    line.append(value.data(), value.size());
    return;
  }
  line.push_back('"');
  for (char c : value) {
    switch (c) {
      case '"': line.append("\\\""); break;
      case '\\': line.append("\\\\"); break;
      case '\n': line.append("\\n"); break;
      case '\t': line.append("\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          absl::StrAppend(&line, "\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          line.push_back(c);
        }
    }
  }
  line.push_back('"');
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(text);
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("log level '", text, "' is not one of debug, info, warning, error"));
}

void SetMinLogLevel(LogLevel level) { min_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= min_level.load(); }

void Log(LogLevel level, absl::string_view event, std::initializer_list<LogField> fields) {
  if (!LogEnabled(level)) return;
  std::string line = absl::StrCat(
      "ts=", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone()),
      " level=", LevelName(level), " event=");
  AppendValue(line, event);
  for (const LogField& field : fields) {
    absl::StrAppend(&line, " ", field.key, "=");
    AppendValue(line, field.value);
  }
  line.push_back('\n');
  // A short write to stderr is not worth retrying for a log line.
  [[maybe_unused]] ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace tensord
