#include "service/metrics/service_metrics.h"

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "service/wire/request_id.h"

namespace tensord {
namespace {

size_t BucketOf(const LatencySnapshot& snapshot) {
  for (size_t i = 0; i < snapshot.counts.size(); ++i) {
    if (snapshot.counts[i] != 0) return i;
  }
  return snapshot.counts.size();
}

TEST(LatencyHistogramTest, BoundsAreInclusiveAndTheLastBucketTakesTheRest) {
  struct Case {
    absl::Duration latency;
    size_t bucket;
  };
  const Case cases[] = {
      {absl::ZeroDuration(), 0},
      {absl::Microseconds(-5), 0},  // clock steps never index out of range
      {absl::Microseconds(100), 0},
      {absl::Microseconds(101), 1},
      {absl::Milliseconds(1), 3},
      {absl::Seconds(60), kLatencyBucketBoundsSeconds.size() - 1},
      {absl::Seconds(61), kLatencyBucketBoundsSeconds.size()},
      {absl::Hours(5), kLatencyBucketBoundsSeconds.size()},
  };
  for (const Case& c : cases) {
    LatencyHistogram histogram;
    histogram.Observe(c.latency);
    LatencySnapshot snapshot = histogram.Snapshot();
    EXPECT_EQ(BucketOf(snapshot), c.bucket) << c.latency;
    EXPECT_EQ(snapshot.count(), 1u) << c.latency;
  }
}

TEST(LatencyHistogramTest, SumIsInSeconds) {
  LatencyHistogram histogram;
  histogram.Observe(absl::Milliseconds(250));
  histogram.Observe(absl::Milliseconds(750));
  EXPECT_DOUBLE_EQ(histogram.Snapshot().sum_seconds, 1.0);
}

TEST(ServiceMetricsTest, CallsAreCountedByRpcAndCode) {
  ServiceMetrics metrics;
  metrics.RecordCall(Rpc::kStat, absl::StatusCode::kOk, absl::Milliseconds(1));
  metrics.RecordCall(Rpc::kStat, absl::StatusCode::kNotFound, absl::Milliseconds(1));
  metrics.RecordCall(Rpc::kStat, absl::StatusCode::kNotFound, absl::Milliseconds(1));
  metrics.RecordCall(Rpc::kFetch, static_cast<absl::StatusCode>(99), absl::Milliseconds(1));
  ServiceMetricsSnapshot snapshot = metrics.Snapshot();
  const size_t stat = static_cast<size_t>(Rpc::kStat);
  const size_t fetch = static_cast<size_t>(Rpc::kFetch);
  EXPECT_EQ(snapshot.calls[stat][0], 1u);
  EXPECT_EQ(snapshot.calls[stat][static_cast<size_t>(absl::StatusCode::kNotFound)], 2u);
  EXPECT_EQ(snapshot.calls[fetch][static_cast<size_t>(absl::StatusCode::kUnknown)], 1u);
  EXPECT_EQ(snapshot.latency[stat].count(), 3u);
  EXPECT_EQ(snapshot.latency[static_cast<size_t>(Rpc::kPut)].count(), 0u);
}

TEST(ServiceMetricsTest, BytesAccumulate) {
  ServiceMetrics metrics;
  metrics.AddRemoteBytesReceived(10);
  metrics.AddRemoteBytesReceived(5);
  metrics.AddRemoteBytesSent(7);
  metrics.AddHandoffBytesSent(100);
  metrics.AddHandoffBytesReceived(3);
  ServiceMetricsSnapshot snapshot = metrics.Snapshot();
  EXPECT_EQ(snapshot.remote_bytes_received, 15u);
  EXPECT_EQ(snapshot.remote_bytes_sent, 7u);
  EXPECT_EQ(snapshot.handoff_bytes_sent, 100u);
  EXPECT_EQ(snapshot.handoff_bytes_received, 3u);
}

TEST(ServiceMetricsTest, RpcNamesAreTheWireMethodNames) {
  EXPECT_EQ(RpcName(Rpc::kPut), "Put");
  EXPECT_EQ(RpcName(Rpc::kIssueHandoffToken), "IssueHandoffToken");
  EXPECT_EQ(RpcName(Rpc::kBatchPut), "BatchPut");
  EXPECT_EQ(RpcName(Rpc::kBatchFetch), "BatchFetch");
  EXPECT_EQ(RpcName(Rpc::kFetchInline), "FetchInline");
  EXPECT_EQ(RpcName(static_cast<Rpc>(kRpcCount - 1)), "LocateCopy") << "the last one is named";
}

// Runs under TSan in CI (the name matches 'Concurren'): recording threads
// and a scraping thread share one ServiceMetrics with no lock.
TEST(ServiceMetricsConcurrencyTest, ConcurrentRecordsAreAllCountedWhileScraped) {
  ServiceMetrics metrics;
  constexpr int kThreads = 4;
  constexpr int kCallsPerThread = 20000;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    for (int i = 0; i < 100000 && !done.load(); ++i) {
      ServiceMetricsSnapshot snapshot = metrics.Snapshot();
      ASSERT_LE(snapshot.remote_bytes_sent, uint64_t{kThreads} * kCallsPerThread);
    }
  });
  std::vector<std::thread> recorders;
  for (int t = 0; t < kThreads; ++t) {
    recorders.emplace_back([&metrics] {
      for (int i = 0; i < kCallsPerThread; ++i) {
        metrics.RecordCall(Rpc::kFetch, absl::StatusCode::kOk, absl::Microseconds(i % 2000));
        metrics.AddRemoteBytesSent(1);
      }
    });
  }
  for (std::thread& recorder : recorders) recorder.join();
  done.store(true);
  scraper.join();
  ServiceMetricsSnapshot snapshot = metrics.Snapshot();
  const size_t fetch = static_cast<size_t>(Rpc::kFetch);
  EXPECT_EQ(snapshot.calls[fetch][0], uint64_t{kThreads} * kCallsPerThread);
  EXPECT_EQ(snapshot.latency[fetch].count(), uint64_t{kThreads} * kCallsPerThread);
  EXPECT_EQ(snapshot.remote_bytes_sent, uint64_t{kThreads} * kCallsPerThread);
}

TEST(RequestIdFormatTest, AcceptsCommonIdFormats) {
  EXPECT_TRUE(IsValidRequestId("0af7651916cd43dd8448eb211c80319c"));
  EXPECT_TRUE(IsValidRequestId("123e4567-e89b-12d3-a456-426614174000"));
  EXPECT_TRUE(IsValidRequestId("svc/worker-3:req_17.a+b="));
  EXPECT_TRUE(IsValidRequestId(std::string(kMaxRequestIdLength, 'x')));
}

TEST(RequestIdFormatTest, RejectsEmptyLongAndLogBreakingIds) {
  EXPECT_FALSE(IsValidRequestId(""));
  EXPECT_FALSE(IsValidRequestId(std::string(kMaxRequestIdLength + 1, 'x')));
  EXPECT_FALSE(IsValidRequestId("a b"));
  EXPECT_FALSE(IsValidRequestId("a\nlevel=error"));
  EXPECT_FALSE(IsValidRequestId("quote\""));
  EXPECT_FALSE(IsValidRequestId("tab\t"));
  EXPECT_FALSE(IsValidRequestId("caf\xc3\xa9"));
}

TEST(RequestIdFormatTest, GeneratedIdsAreValidHexAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string id = GenerateRequestId();
    EXPECT_EQ(id.size(), 16u) << id;
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    EXPECT_TRUE(IsValidRequestId(id)) << id;
    seen.insert(std::move(id));
  }
  EXPECT_EQ(seen.size(), 1000u);
}

}  // namespace
}  // namespace tensord
