#include "client/src/fork_generation.h"

#include <pthread.h>

#include <atomic>

namespace tensord {
namespace {

std::atomic<uint64_t> forks{0};
void CountForkInChild() { forks.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

uint64_t ForkGeneration() {
  static const bool counting_forks = ::pthread_atfork(nullptr, nullptr, &CountForkInChild) == 0;
  static_cast<void>(counting_forks);
  return forks.load(std::memory_order_relaxed);
}

}  // namespace tensord
