#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace tensord::bench {
std::string FormatValue(double value) {
  const double magnitude = std::fabs(value);
  if (magnitude >= 1000) return absl::StrFormat("%.0f", value);
  if (magnitude >= 100) return absl::StrFormat("%.1f", value);
  if (magnitude >= 1) return absl::StrFormat("%.2f", value);
  if (magnitude == 0) return "0";
  return absl::StrFormat("%.3g", value);
}

namespace {

std::string FormatBound(const Row& row) {
  const Target& target = *row.target;
  if (target.kind == Target::Kind::kValueAtMost || target.kind == Target::Kind::kValueAtLeast) {
    return absl::StrCat(FormatValue(target.bound), " ", row.unit);
  }
  return absl::StrFormat("%.2fx", target.bound);
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  if (bytes == 0) return "-";
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  uint64_t whole = bytes;
  while (unit < 4 && whole % 1024 == 0 && whole >= 1024) {
    whole /= 1024;
    ++unit;
  }
  if (unit > 0 || bytes < 1024) return absl::StrCat(whole, " ", kUnits[unit]);
  return absl::StrCat(bytes, " B");
}

std::string DescribeTarget(const Row& row) {
  if (!row.target.has_value()) return "";
  switch (row.target->kind) {
    case Target::Kind::kRatioAtLeast: return ">= " + FormatBound(row);
    case Target::Kind::kRatioAtMost: return "<= " + FormatBound(row);
    case Target::Kind::kValueAtMost: return "<= " + FormatBound(row);
    case Target::Kind::kValueAtLeast: return ">= " + FormatBound(row);
  }
  return "";
}

std::string TargetVerdict(const Row& row) {
  if (!row.target.has_value()) return "";
  const Target& target = *row.target;
  bool met = false;
  switch (target.kind) {
    case Target::Kind::kRatioAtLeast:
      if (!row.ratio.has_value()) return "";
      met = *row.ratio >= target.bound;
      break;
    case Target::Kind::kRatioAtMost:
      if (!row.ratio.has_value()) return "";
      met = *row.ratio <= target.bound;
      break;
    case Target::Kind::kValueAtMost: met = row.value <= target.bound; break;
    case Target::Kind::kValueAtLeast: met = row.value >= target.bound; break;
  }
  return met ? "met" : "MISSED";
}

void Report::Section(std::string title, std::string explanation) {
  sections_.push_back({std::move(title), std::move(explanation)});
}

Row& Report::Add(Row row) {
  if (row.section.empty() && !sections_.empty()) row.section = sections_.back().title;
  rows_.push_back(std::move(row));
  return rows_.back();
}

std::string Report::Format() const {
  std::string out;
  const std::string header =
      absl::StrFormat("  %-40s %8s %10s %-9s %7s  %-26s %-19s %s\n", "case", "size", "value",
                      "unit", "ratio", "vs (baseline)", "target", "");
  for (const SectionInfo& section : sections_) {
    const bool empty = std::none_of(rows_.begin(), rows_.end(),
                                    [&](const Row& row) { return row.section == section.title; });
    if (empty) continue;  // not run this time
    absl::StrAppend(&out, "\n== ", section.title, " ==\n");
    if (!section.explanation.empty()) absl::StrAppend(&out, "  ", section.explanation, "\n");
    absl::StrAppend(&out, header);
    for (const Row& row : rows_) {
      if (row.section != section.title) continue;
      const std::string ratio = row.ratio.has_value() ? absl::StrFormat("%.3f", *row.ratio) : "";
      const std::string target = DescribeTarget(row);
      const std::string verdict = TargetVerdict(row);
      absl::StrAppend(&out, absl::StrFormat("  %-40s %8s %10s %-9s %7s  %-26s %-19s %s", row.name,
                                            FormatBytes(row.bytes), FormatValue(row.value),
                                            row.unit, ratio, row.baseline, target, verdict));
      if (!row.note.empty()) absl::StrAppend(&out, "  # ", row.note);
      // Trailing blanks from empty columns are noise in logs.
      while (!out.empty() && out.back() == ' ') out.pop_back();
      out.push_back('\n');
    }
  }
  return out;
}

absl::Status Report::WriteJson(const std::string& path, const std::string& mode) const {
  // Rows in table order: by section, then as added.
  std::vector<const Row*> ordered;
  for (const SectionInfo& section : sections_) {
    for (const Row& row : rows_) {
      if (row.section == section.title) ordered.push_back(&row);
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const Row* row_pointer : ordered) {
    const Row& row = *row_pointer;
    nlohmann::json entry = {{"section", row.section}, {"case", row.name},
                            {"bytes", row.bytes},     {"value", row.value},
                            {"unit", row.unit},       {"baseline", row.baseline},
                            {"note", row.note}};
    entry["ratio"] = row.ratio.has_value() ? nlohmann::json(*row.ratio) : nlohmann::json();
    if (row.target.has_value()) {
      entry["target"] = DescribeTarget(row);
      entry["target_met"] = TargetVerdict(row) == "met";
    }
    rows.push_back(std::move(entry));
  }
  nlohmann::json sections = nlohmann::json::array();
  for (const SectionInfo& section : sections_) {
    sections.push_back({{"title", section.title}, {"explanation", section.explanation}});
  }
  nlohmann::json document = {{"mode", mode}, {"sections", sections}, {"rows", rows}};
  std::ofstream out(path, std::ios::trunc);
  out << document.dump(2) << "\n";
  if (!out.good()) return absl::UnavailableError(absl::StrCat("cannot write JSON to ", path));
  return absl::OkStatus();
}

}  // namespace tensord::bench
