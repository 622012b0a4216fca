#include "tests/integration/cluster_test_support.h"

#include "absl/strings/str_cat.h"

namespace tensord::testing {

void EtcdClusterTest::SetUp() {
  if (!EtcdProcess::Available()) {
    GTEST_SKIP() << kEtcdBinary << " is absent: install etcd-server (deploy/install-deps.sh "
                 << "does) to run the cluster tests";
  }
  absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start();
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  etcd_ = std::move(*etcd);
}

std::vector<std::string> EtcdClusterTest::NodeFlags(const std::string& name,
                                                    absl::string_view prefix) const {
  return {"--etcd-endpoints=" + etcd_->endpoint(), "--node-name=" + name,
          absl::StrCat("--etcd-lease-ttl=", absl::FormatDuration(kTtl)),
          absl::StrCat("--etcd-prefix=", prefix)};
}

}  // namespace tensord::testing
