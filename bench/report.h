// The benchmark's one table: rows grouped by section, printed as text and
// optionally written as JSON. A row may carry a ratio against a baseline
// measured in the same run, and the target for that ratio; targets
// are reported, never asserted.
#ifndef TENSORD_BENCH_REPORT_H_
#define TENSORD_BENCH_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tensord::bench {

// What a row is checked against: ratio >= bound, ratio <= bound, or the value
// itself <= or >= bound (for absolute targets such as "cached fetch <= 10 us"
// or ">= 100000 tensors/s").
struct Target {
  enum class Kind { kRatioAtLeast, kRatioAtMost, kValueAtMost, kValueAtLeast };
  Kind kind = Kind::kRatioAtLeast;
  double bound = 0;

  static Target RatioAtLeast(double bound) { return {Kind::kRatioAtLeast, bound}; }
  static Target RatioAtMost(double bound) { return {Kind::kRatioAtMost, bound}; }
  static Target ValueAtMost(double bound) { return {Kind::kValueAtMost, bound}; }
  static Target ValueAtLeast(double bound) { return {Kind::kValueAtLeast, bound}; }
};

struct Row {
  std::string section;
  std::string name;    // what was measured, e.g. "fetch warm (Fetch)"
  uint64_t bytes = 0;  // tensor or transfer size; 0 when not about a size
  double value = 0;
  std::string unit;             // "GB/s", "ops/s", "us", "MiB"...
  std::optional<double> ratio;  // value / baseline value
  std::string baseline;         // what the ratio is against
  std::optional<Target> target;
  std::string note;  // anything a reader needs to interpret the row
};

class Report {
 public:
  // Starts a section; rows added afterwards belong to it. `explanation` is
  // printed under the section's header line.
  void Section(std::string title, std::string explanation = "");
  Row& Add(Row row);

  // The whole table, sections in the order they were started.
  std::string Format() const;
  absl::Status WriteJson(const std::string& path, const std::string& mode) const;

  const std::vector<Row>& rows() const { return rows_; }

 private:
  struct SectionInfo {
    std::string title;
    std::string explanation;
  };
  std::vector<SectionInfo> sections_;
  std::vector<Row> rows_;
};

// "4 KiB", "256 MiB", "1 GiB" (exact binary units), or "-" for 0.
std::string FormatBytes(uint64_t bytes);
// A row's value as the table prints it: 3 significant digits or more.
std::string FormatValue(double value);

// "met", "MISSED" or "" (no target, or no value to compare).
std::string TargetVerdict(const Row& row);
// ">= 0.90x", "<= 10 us"...
std::string DescribeTarget(const Row& row);

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_REPORT_H_
