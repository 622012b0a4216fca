// A fixture for the cluster tests: a fresh real etcd on loopback (the test
// is skipped where /usr/bin/etcd is absent) and the flags that join a
// tensord node to it.
#ifndef TENSORD_TESTS_INTEGRATION_CLUSTER_TEST_SUPPORT_H_
#define TENSORD_TESTS_INTEGRATION_CLUSTER_TEST_SUPPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/process/etcd_process.h"

namespace tensord::testing {

class EtcdClusterTest : public ::testing::Test {
 protected:
  // etcd's smallest TTL with its default heartbeat is 2 s; short keeps the
  // tests fast.
  static constexpr absl::Duration kTtl = absl::Seconds(2);

  void SetUp() override;

  // --etcd-endpoints, --node-name, --etcd-lease-ttl (kTtl), --etcd-prefix.
  std::vector<std::string> NodeFlags(const std::string& name,
                                     absl::string_view prefix = "/tensord-test") const;

  std::unique_ptr<EtcdProcess> etcd_;
};

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_INTEGRATION_CLUSTER_TEST_SUPPORT_H_
