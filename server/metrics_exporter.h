// Prometheus metrics over HTTP (`--metrics-listen`): a scrape of /metrics
// reads the service's counters and the registry's and handoff socket's
// current state; nothing is kept in sync between scrapes.
#ifndef TENSORD_SERVER_METRICS_EXPORTER_H_
#define TENSORD_SERVER_METRICS_EXPORTER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service/transport/tensor_server.h"

namespace prometheus {
class Exposer;
}

namespace tensord {

class MetricsCollectable;

class MetricsExporter {
 public:
  // Serves GET /metrics on `listen_address` ("host:port"; port 0 picks
  // one). `server` must outlive the exporter. INVALID_ARGUMENT for a
  // malformed address, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsExporter>> Start(const std::string& listen_address,
                                                                const TensorServer& server);
  // Stops the HTTP server; no scrape runs after it returns.
  ~MetricsExporter();

  // "host:port" with the bound port filled in.
  const std::string& bound_address() const { return bound_address_; }

 private:
  MetricsExporter() = default;

  std::shared_ptr<MetricsCollectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string bound_address_;
};

}  // namespace tensord

#endif  // TENSORD_SERVER_METRICS_EXPORTER_H_
