// Structured (logfmt) log lines: `ts=... level=info event=put name=w bytes=4096`.
#ifndef TENSORD_SERVICE_COMMON_LOG_H_
#define TENSORD_SERVICE_COMMON_LOG_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tensord {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text);

// Lines below this level are dropped. Thread-safe.
void SetMinLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);

// One key=value field; values are quoted when they need it.
struct LogField {
  template <typename T>
  LogField(absl::string_view k, const T& v) : key(k), value(absl::StrCat(v)) {}
  LogField(absl::string_view k, absl::string_view v) : key(k), value(v) {}
  LogField(absl::string_view k, const char* v) : key(k), value(v) {}
  LogField(absl::string_view k, const std::string& v) : key(k), value(v) {}
  absl::string_view key;
  std::string value;
};

// Writes one line to stderr atomically (one write(2) call), so lines from
// concurrent threads never interleave.
void Log(LogLevel level, absl::string_view event, std::initializer_list<LogField> fields = {});

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_LOG_H_
