#include "service/registry/change_feed.h"

#include <algorithm>
#include <utility>

namespace tensord {

ChangeFeed::ChangeFeed(size_t history_items) : history_items_(std::max<size_t>(history_items, 1)) {}

ChangeFeed::~ChangeFeed() {
  {
    MutexLock signal(&signal_mutex_);
    stopping_ = true;
  }
  appended_signal_.SignalAll();
  if (dispatcher_.joinable()) dispatcher_.join();
}

void ChangeFeed::Append(ChangeEvent event) {
  auto shared = std::make_shared<const ChangeEvent>(std::move(event));
  {
    MutexLock lock(&mutex_);
    items_in_history_ += shared->items.size();
    history_.push_back(std::move(shared));
    // The newest change always stays, however many items it has.
    while (history_.size() > 1 && items_in_history_ > history_items_) {
      items_in_history_ -= history_.front()->items.size();
      complete_after_ = history_.front()->version;
      history_.pop_front();
    }
  }
  {
    MutexLock signal(&signal_mutex_);
    ++appended_;
  }
  appended_signal_.Signal();
}

void ChangeFeed::RestartHistoryAt(uint64_t version) {
  MutexLock lock(&mutex_);
  history_.clear();
  items_in_history_ = 0;
  complete_after_ = std::max(complete_after_, version);
}

ChangeRead ChangeFeed::ReadAfter(uint64_t after, size_t max_events) const {
  ChangeRead read;
  ReaderMutexLock lock(&mutex_);
  if (after < complete_after_) {
    read.missed_after = after;
    read.missed_to = complete_after_;
    after = complete_after_;
  }
  auto first =
      std::upper_bound(history_.begin(), history_.end(), after,
                       [](uint64_t position, const std::shared_ptr<const ChangeEvent>& event) {
                         return position < event->version;
                       });
  const size_t available = static_cast<size_t>(history_.end() - first);
  read.events.assign(first, first + static_cast<std::ptrdiff_t>(std::min(available, max_events)));
  return read;
}

uint64_t ChangeFeed::complete_after() const {
  ReaderMutexLock lock(&mutex_);
  return complete_after_;
}

std::unique_ptr<ChangeFeed::Subscription> ChangeFeed::Subscribe(std::function<void()> wake) {
  MutexLock dispatch(&dispatch_mutex_);
  subscribers_.push_back(Subscriber{std::move(wake)});
  if (!dispatcher_.joinable()) {
    dispatcher_ = std::thread([this] { Dispatch(); });
    dispatcher_id_ = dispatcher_.get_id();
  }
  return std::unique_ptr<Subscription>(new Subscription(*this, std::prev(subscribers_.end())));
}

void ChangeFeed::Unsubscribe(std::list<Subscriber>::iterator subscriber) {
  if (std::this_thread::get_id() == dispatcher_id_) {
    // From inside a wake: the dispatcher already holds dispatch_mutex_, and
    // the wake may be this subscriber's own, still running.
    subscriber->removed = true;
    return;
  }
  MutexLock dispatch(&dispatch_mutex_);
  subscribers_.erase(subscriber);
}

void ChangeFeed::Dispatch() {
  uint64_t dispatched = 0;
  for (;;) {
    {
      MutexLock signal(&signal_mutex_);
      // Appends that arrive while subscribers are being woken are covered
      // by the next round: a wake reads everything up to the newest.
      while (!stopping_ && appended_ == dispatched) appended_signal_.Wait(&signal_mutex_);
      if (stopping_) return;
      dispatched = appended_;
    }
    MutexLock dispatch(&dispatch_mutex_);
    for (auto it = subscribers_.begin(); it != subscribers_.end();) {
      auto current = it++;
      if (!current->removed) current->wake();
      if (current->removed) subscribers_.erase(current);
    }
  }
}

}  // namespace tensord
