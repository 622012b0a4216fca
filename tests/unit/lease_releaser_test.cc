// LeaseReleaser: ids queued by droppers reach the drain in batches of at
// most kMaxLeasesPerRelease, each id once, in order; Flush waits for what was
// queued before it; the owner's drain on its own thread takes part.
#include "client/src/lease_releaser.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "service/common/mutex.h"
#include "service/wire/batch_limits.h"
#include "tensord/v1/handoff.pb.h"

namespace tensord {
namespace {

// What a connection does: takes and "sends" batches, recording them.
class RecordingDrain {
 public:
  void Drain(LeaseReleaser& releaser) {
    MutexLock lock(&mutex_);
    while (true) {
      std::vector<uint64_t> batch = releaser.Take();
      if (batch.empty()) return;
      batches_.push_back(batch);
      releaser.Sent(batch.size());
    }
  }
  std::vector<std::vector<uint64_t>> batches() {
    MutexLock lock(&mutex_);
    return batches_;
  }

 private:
  Mutex mutex_;
  std::vector<std::vector<uint64_t>> batches_ ABSL_GUARDED_BY(mutex_);
};

TEST(LeaseReleaserTest, EveryIdIsSentOnceInOrderInBoundedBatches) {
  RecordingDrain drain;
  LeaseReleaser* self = nullptr;
  LeaseReleaser releaser([&] { drain.Drain(*self); });
  self = &releaser;
  constexpr uint64_t kIds = 3 * kMaxLeasesPerRelease + 17;
  for (uint64_t id = 1; id <= kIds; ++id) releaser.Release(id);
  releaser.Flush();
  std::vector<uint64_t> sent;
  for (const std::vector<uint64_t>& batch : drain.batches()) {
    EXPECT_FALSE(batch.empty());
    EXPECT_LE(batch.size(), kMaxLeasesPerRelease);
    sent.insert(sent.end(), batch.begin(), batch.end());
  }
  ASSERT_EQ(sent.size(), kIds);
  for (uint64_t i = 0; i < kIds; ++i) ASSERT_EQ(sent[i], i + 1);
  // Far fewer round trips than ids: the thread takes what queued meanwhile.
  EXPECT_LT(drain.batches().size(), kIds / 4);
}

TEST(LeaseReleaserTest, FlushWaitsForIdsQueuedFromOtherThreads) {
  RecordingDrain drain;
  LeaseReleaser* self = nullptr;
  LeaseReleaser releaser([&] { drain.Drain(*self); });
  self = &releaser;
  std::vector<std::thread> droppers;
  for (uint64_t t = 0; t < 4; ++t) {
    droppers.emplace_back([&releaser, t] {
      for (uint64_t i = 0; i < 1000; ++i) releaser.Release(t * 1000 + i + 1);
    });
  }
  for (std::thread& dropper : droppers) dropper.join();
  releaser.Flush();
  size_t sent = 0;
  for (const std::vector<uint64_t>& batch : drain.batches()) sent += batch.size();
  EXPECT_EQ(sent, 4000u);
}

TEST(LeaseReleaserTest, ADrainOnTheOwnersThreadCountsForFlush) {
  std::atomic<int> thread_drains{0};
  RecordingDrain drain;
  LeaseReleaser* self = nullptr;
  LeaseReleaser releaser([&] {
    thread_drains.fetch_add(1);
    drain.Drain(*self);
  });
  self = &releaser;
  releaser.Release(7);
  drain.Drain(releaser);  // as a connection does before each call
  releaser.Flush();
  size_t sent = 0;
  for (const std::vector<uint64_t>& batch : drain.batches()) sent += batch.size();
  EXPECT_EQ(sent, 1u);
}

TEST(LeaseReleaserTest, NothingQueuedFlushesAtOnceAndDestroysWithoutAThread) {
  LeaseReleaser releaser([] { FAIL() << "nothing was queued"; });
  releaser.Flush();
}

TEST(LeaseReleaserTest, DestroyingWithIdsStillQueuedReturns) {
  Mutex blocked;
  blocked.Lock();
  {
    LeaseReleaser releaser([&] {
      blocked.Lock();  // a connection stuck on its socket
      blocked.Unlock();
    });
    releaser.Release(1);
    releaser.Release(2);
    blocked.Unlock();
  }
  SUCCEED();
}

// A thread's stack is a mapping: with none left (vm.max_map_count reached,
// here in a child process) the thread cannot start. Release must not throw
// (it runs in a tensor's destructor, where a throw aborts); the ids wait,
// and once mappings are free again the next Release starts the thread and
// sends them all.
TEST(LeaseReleaserDeathTest, ReleaseWithoutRoomForItsThreadQueuesTheIds) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's runtime needs mappings of its own while none are left";
#endif
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        RecordingDrain drain;
        LeaseReleaser* self = nullptr;
        LeaseReleaser releaser([&] { drain.Drain(*self); });
        self = &releaser;
        // Alternating protections keep neighbouring pages from merging into
        // one mapping.
        std::vector<void*> pages;
        const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
        for (int protection = PROT_READ;; protection ^= PROT_READ) {
          void* taken = ::mmap(nullptr, page, protection, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          if (taken == MAP_FAILED) break;
          pages.push_back(taken);
        }
        releaser.Release(1);
        if (!drain.batches().empty()) ::_exit(3);  // nothing could send it
        for (size_t i = 0; i < 64 && !pages.empty(); ++i) {
          ::munmap(pages.back(), page);
          pages.pop_back();
        }
        releaser.Release(2);
        releaser.Flush();
        std::vector<uint64_t> sent;
        for (const std::vector<uint64_t>& batch : drain.batches()) {
          sent.insert(sent.end(), batch.begin(), batch.end());
        }
        ::_exit(sent == std::vector<uint64_t>{1, 2} ? 0 : 4);
      },
      ::testing::ExitedWithCode(0), "");
}

// The ids a request carries never push it past one packet (the server
// closes a connection that sends a larger one, ending all of its leases):
// a small request takes a full batch, one near the packet size as many as
// fit at their largest, and one at the size none.
TEST(LeaseReleaserTest, ReleaseIdsRideOnlyAsFarAsTheRequestsPacketHasRoom) {
  EXPECT_EQ(ReleaseIdsThatFit(100), kMaxLeasesPerRelease);
  EXPECT_EQ(ReleaseIdsThatFit(kMaxBatchPacketBytes), 0u);
  v1::HandoffRequest request;
  request.set_request_id(~uint64_t{0});
  while (request.ByteSizeLong() < kMaxBatchPacketBytes - 1024) {
    v1::NameVersion* item = request.mutable_acquire_many()->add_items();
    item->set_name("layers/0123456789/weight");
    item->set_version(~uint64_t{0});
  }
  const size_t fit = ReleaseIdsThatFit(request.ByteSizeLong());
  EXPECT_GT(fit, 0u);
  EXPECT_LT(fit, kMaxLeasesPerRelease);
  for (size_t i = 0; i < fit; ++i) request.add_release_lease_ids(~uint64_t{0});
  EXPECT_LE(request.SerializeAsString().size(), kMaxBatchPacketBytes);
}

}  // namespace
}  // namespace tensord
