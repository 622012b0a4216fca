// A TCP proxy on 127.0.0.1 for fault tests: forwards every connection to
// one target, and can be paused, which stops all forwarding (no byte moves
// either way, connections stay open, new ones are not served), as a
// network partition does; resuming lets the held bytes flow again.
#ifndef TENSORD_TESTS_INTEGRATION_TCP_PROXY_H_
#define TENSORD_TESTS_INTEGRATION_TCP_PROXY_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace tensord::testing {

// Thread-safe.
class TcpProxy {
 public:
  // Listens on a free loopback port; forwards to `target_host:target_port`.
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(std::string target_host, int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:PORT", for an etcd endpoint behind it.
  std::string http_endpoint() const;

  void Pause();
  void Resume();
  bool paused() const { return paused_.load(); }

 private:
  TcpProxy() = default;
  void Loop();

  std::string target_host_;
  int target_port_ = 0;
  int port_ = 0;
  int listener_ = -1;
  int wake_ = -1;  // eventfd: stop, pause, resume
  std::atomic<bool> paused_{false};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_INTEGRATION_TCP_PROXY_H_
