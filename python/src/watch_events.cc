#include "python/src/watch_events.h"

#include <string>
#include <utility>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "python/src/status_error.h"

namespace tensord::python {
namespace {

namespace nb = nanobind;
using namespace nb::literals;

// How long one wait lasts before Python gets to check for signals.
constexpr absl::Duration kSignalCheckInterval = absl::Milliseconds(100);

const char* KindName(WatchEvent::Kind kind) {
  switch (kind) {
    case WatchEvent::Kind::kPublished: return "published";
    case WatchEvent::Kind::kDeleted: return "deleted";
    case WatchEvent::Kind::kEvicted: return "evicted";
    case WatchEvent::Kind::kFellBehind: return "fell_behind";
  }
  return "unknown";
}

}  // namespace

PythonWatch::PythonWatch(std::unique_ptr<WatchStream> stream, nb::object owner)
    : stream_(std::move(stream)), owner_(std::move(owner)) {}

std::optional<WatchEvent> PythonWatch::Next(std::optional<double> timeout_seconds, bool& ended) {
  ended = false;
  if (closed_) {
    ended = true;
    return std::nullopt;
  }
  if (timeout_seconds.has_value() && !(*timeout_seconds >= 0)) {
    throw nb::value_error(
        absl::StrCat("timeout must be None or >= 0 seconds, got ", *timeout_seconds).c_str());
  }
  const absl::Time deadline = timeout_seconds.has_value()
                                  ? absl::Now() + absl::Seconds(*timeout_seconds)
                                  : absl::InfiniteFuture();
  const std::shared_ptr<WatchStream> stream = stream_;
  for (;;) {
    const absl::Duration wait = std::min(kSignalCheckInterval, deadline - absl::Now());
    absl::StatusOr<WatchEvent> event;
    {
      nb::gil_scoped_release released;
      event = stream->Next(std::max(wait, absl::ZeroDuration()));
    }
    if (closed_) {
      ended = true;  // closed by another thread meanwhile
      return std::nullopt;
    }
    if (event.ok()) return *std::move(event);
    if (!absl::IsDeadlineExceeded(event.status())) throw StatusError(event.status());
    if (absl::Now() >= deadline) return std::nullopt;
    // Ctrl-C (KeyboardInterrupt) ends a long wait.
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
  }
}

uint64_t PythonWatch::position() const {
  return closed_ ? position_at_close_ : stream_->position();
}

void PythonWatch::Close() {
  if (closed_) return;
  closed_ = true;
  position_at_close_ = stream_->position();
  std::shared_ptr<WatchStream> last = std::move(stream_);
  last->Cancel();
  // Destroying the stream waits for gRPC to let go; a next() still waiting
  // in another thread holds its own reference and returns.
  nb::gil_scoped_release released;
  last.reset();
}

void BindWatch(nb::module_& m) {
  nb::class_<WatchEvent>(m, "WatchEvent", "One change under a watched prefix.")
      .def_prop_ro(
          "kind", [](const WatchEvent& e) { return std::string(KindName(e.kind)); },
          "'published', 'deleted', 'evicted' (a cache version the server removed) or "
          "'fell_behind' (changes after missed_after up to version may be missing: "
          "re-read what you need).")
      .def_prop_ro(
          "version", [](const WatchEvent& e) { return e.version; },
          "The change's place in the server's order (resume after it with from_version); "
          "an existing event: the item's version; fell_behind: where the watch resumed.")
      .def_prop_ro(
          "items", [](const WatchEvent& e) { return e.items; },
          "TensorInfo of the new versions (published) or of the removed ones.")
      .def_prop_ro("atomic_group", [](const WatchEvent& e) { return e.atomic_group; })
      .def_prop_ro(
          "existing", [](const WatchEvent& e) { return e.existing; },
          "Sent first, for send_existing=True.")
      .def_prop_ro("missed_after", [](const WatchEvent& e) { return e.missed_after; })
      .def("__repr__", [](const WatchEvent& e) {
        std::string names;
        for (size_t i = 0; i < e.items.size() && i < 3; ++i) {
          absl::StrAppend(&names, i ? ", " : "", "'", e.items[i].name, "'");
        }
        if (e.items.size() > 3) absl::StrAppend(&names, ", ... (", e.items.size(), " items)");
        return absl::StrCat("WatchEvent(kind='", KindName(e.kind), "', version=", e.version,
                            ", items=[", names, "]", e.atomic_group ? ", atomic_group=True" : "",
                            e.existing ? ", existing=True" : "", ")");
      });

  nb::class_<PythonWatch>(m, "Watch",
                          "The changes under a prefix as they happen (Client.watch). Iterate it, "
                          "or call next(timeout); use it in a with block or close() it.")
      .def(
          "next",
          [](PythonWatch& self, std::optional<double> timeout) -> nb::object {
            bool ended = false;
            std::optional<WatchEvent> event = self.Next(timeout, ended);
            if (!event.has_value()) return nb::none();
            return nb::cast(*std::move(event));
          },
          "timeout"_a = nb::none(),
          "The next WatchEvent, or None when none came within timeout seconds (None: wait). "
          "Raises tensord.Error once the call has ended (UNAVAILABLE when the server shut down).")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__",
           [](PythonWatch& self) {
             bool ended = false;
             std::optional<WatchEvent> event = self.Next(std::nullopt, ended);
             if (!event.has_value()) throw nb::stop_iteration();
             return *std::move(event);
           })
      .def_prop_ro("position", &PythonWatch::position,
                   "Every change up to this version has been returned or reported missed: "
                   "a later Client.watch(..., from_version=position) resumes here.")
      .def("close", &PythonWatch::Close, "Ends the call; iteration stops.")
      .def_prop_ro("closed", &PythonWatch::closed)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__",
          [](PythonWatch& self, nb::handle, nb::handle, nb::handle) {
            self.Close();
            return false;
          },
          "exc_type"_a.none(), "exc_value"_a.none(), "traceback"_a.none());
}

}  // namespace tensord::python
