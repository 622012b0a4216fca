// watch PREFIX: one line per change to names starting with PREFIX, as the
// server orders them, until --count events, --for elapses, or the call ends.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/tensorctl/commands.h"
#include "client/tensorctl/tensor_text.h"
#include "service/common/byte_size.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"

namespace tensord::tensorctl {
namespace {

const char* KindWord(const WatchEvent& event) {
  if (event.existing) return "existing";
  switch (event.kind) {
    case WatchEvent::Kind::kPublished: return "published";
    case WatchEvent::Kind::kDeleted: return "deleted";
    case WatchEvent::Kind::kEvicted: return "evicted";
    case WatchEvent::Kind::kFellBehind: return "fell-behind";
  }
  return "?";
}

void PrintEvent(const WatchEvent& event) {
  if (event.kind == WatchEvent::Kind::kFellBehind) {
    absl::PrintF(
        "%d fell-behind: changes after version %d up to %d may be missing (the server's history "
        "moved on); re-read what you need\n",
        event.version, event.missed_after, event.version);
    return;
  }
  const std::string group =
      event.atomic_group ? absl::StrCat(" (atomic group of ", event.items.size(), ")") : "";
  for (const TensorInfo& item : event.items) {
    if (!item.node.empty()) {
      // A cluster watch: the name record holds the writer and the size,
      // not the layout; a version is known by its cluster order.
      if (event.kind == WatchEvent::Kind::kPublished) {
        absl::PrintF("%d %s %s (cluster version %d) written on %s %s%s\n", event.version,
                     KindWord(event), item.name, item.version, item.node,
                     FormatByteSize(item.total_bytes), group);
      } else {
        absl::PrintF("%d %s %s (on %s)\n", event.version, KindWord(event), item.name, item.node);
      }
      continue;
    }
    if (event.kind == WatchEvent::Kind::kPublished) {
      absl::PrintF("%d %s %s %s%s %s%s\n", event.version, KindWord(event), item.name,
                   dlpack::DataTypeName(item.dtype), FormatShape(item.shape),
                   FormatByteSize(item.total_bytes), group);
    } else if (item.version == 0) {
      // A cluster delete removes the name's record, whatever its version.
      absl::PrintF("%d %s %s\n", event.version, KindWord(event), item.name);
    } else {
      absl::PrintF("%d %s %s (version %d)\n", event.version, KindWord(event), item.name,
                   item.version);
    }
  }
}

}  // namespace

absl::Status RunWatch(Client& client, const Invocation& invocation) {
  const std::string prefix = invocation.arguments.empty() ? "" : invocation.arguments[0];
  absl::Duration run_for = absl::InfiniteDuration();
  if (invocation.Has(kForOption)) {
    const std::string text = invocation.Text(kForOption);
    if (!absl::ParseDuration(text, &run_for) || run_for <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--for '", text, "' is not a positive duration (e.g. 30s, 5m)"));
    }
  }
  const uint64_t max_events = invocation.Number(kCountOption);
  WatchOptions options;
  options.from_version = invocation.Number(kFromOption);
  options.send_existing = invocation.Has(kExistingOption);
  options.cluster = invocation.Has(kClusterOption);
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<WatchStream> watch, client.Watch(prefix, options));
  const absl::Time end =
      run_for == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + run_for;
  absl::Status ended;
  for (uint64_t events = 0; max_events == 0 || events < max_events; ++events) {
    const absl::Duration left =
        end == absl::InfiniteFuture() ? absl::InfiniteDuration() : end - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    absl::StatusOr<WatchEvent> event = watch->Next(left);
    // --for elapsed (only Next's own wait ends with this code while the call goes on).
    if (absl::IsDeadlineExceeded(event.status()) && absl::Now() >= end) break;
    if (!event.ok()) {
      ended = event.status();
      break;
    }
    PrintEvent(*event);
    std::fflush(stdout);  // a reader of a pipe sees each change as it comes
  }
  // Where a later `watch --from` resumes, also when the call broke off.
  absl::FPrintF(stderr, "watch %s: position %d\n", prefix, watch->position());
  return ended;
}

}  // namespace tensord::tensorctl
