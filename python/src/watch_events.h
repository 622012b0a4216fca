// tensord.Watch and tensord.WatchEvent: Client.watch's stream of changes,
// iterable, with a timeout-bounded next() and a context manager that ends
// the call.
#ifndef TENSORD_PYTHON_SRC_WATCH_EVENTS_H_
#define TENSORD_PYTHON_SRC_WATCH_EVENTS_H_

#include <memory>
#include <optional>

#include <nanobind/nanobind.h>

#include "tensord/client.h"

namespace tensord::python {

class PythonWatch {
 public:
  // `owner` (the Python Client) is kept alive as long as the watch.
  PythonWatch(std::unique_ptr<WatchStream> stream, nanobind::object owner);

  // The next event; nullopt when none came within `timeout_seconds` (none:
  // wait as long as it takes, still answering Ctrl-C), or with `ended` set
  // after close(). Throws StatusError once the call has ended otherwise.
  std::optional<WatchEvent> Next(std::optional<double> timeout_seconds, bool& ended);
  uint64_t position() const;
  void Close();
  bool closed() const { return closed_; }

 private:
  // Shared with a next() in progress, so close() from another thread
  // (cancelling it) never frees the stream under it.
  std::shared_ptr<WatchStream> stream_;
  nanobind::object owner_;
  bool closed_ = false;
  uint64_t position_at_close_ = 0;
};

void BindWatch(nanobind::module_& module);

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_SRC_WATCH_EVENTS_H_
