#include "service/cluster/record_reader.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace tensord {

RecordReader::RecordReader(std::shared_ptr<KvStore> store, RecordReaderOptions options)
    : store_(std::move(store)), options_(std::move(options)) {
  const size_t threads = std::max<size_t>(options_.threads, 1);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { WorkLoop(); });
}

RecordReader::~RecordReader() {
  std::deque<Slot> abandoned;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    abandoned.swap(queue_);
    work_ready_.SignalAll();
  }
  for (std::thread& thread : threads_) thread.join();
  for (Slot& slot : abandoned) {
    slot.request->answers[slot.index] = absl::UnavailableError("the node is shutting down");
    if (--slot.request->left == 0) std::move(slot.request->done)(std::move(slot.request->answers));
  }
}

void RecordReader::Read(std::vector<std::string> names, Done done) {
  if (names.empty()) {
    std::move(done)({});
    return;
  }
  auto request = std::make_shared<Request>();
  request->answers.resize(names.size(), std::nullopt);
  request->left = names.size();
  request->names = std::move(names);
  request->done = std::move(done);
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      for (size_t i = 0; i < request->names.size(); ++i) queue_.push_back(Slot{request, i});
      work_ready_.SignalAll();
      return;
    }
  }
  std::vector<Answer> refused(request->names.size(),
                              absl::UnavailableError("the node is shutting down"));
  std::move(request->done)(std::move(refused));
}

void RecordReader::WorkLoop() {
  while (true) {
    std::vector<Slot> batch;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty()) work_ready_.Wait(&mu_);
      if (stopping_) return;
      // Distinct names up to the transaction's limit; a name asked twice
      // rides along with its first asking.
      absl::flat_hash_map<absl::string_view, bool> names;
      while (!queue_.empty()) {
        const Slot& next = queue_.front();
        const std::string& name = next.request->names[next.index];
        if (!names.contains(name) && names.size() == options_.max_names_per_txn) break;
        names.emplace(name, true);
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    ReadBatch(std::move(batch));
  }
}

void RecordReader::ReadBatch(std::vector<Slot> batch) {
  std::vector<KvOp> gets;
  absl::flat_hash_map<std::string, size_t> op_of;
  for (const Slot& slot : batch) {
    const std::string& name = slot.request->names[slot.index];
    if (op_of.emplace(name, gets.size()).second) {
      gets.push_back(KvOp::Get(NameRecordKey(options_.prefix, name)));
    }
  }
  absl::StatusOr<KvTxnResult> read = store_->Txn({}, gets, {});
  {
    MutexLock lock(&mu_);
    ++transactions_;
    names_read_ += gets.size();
  }
  std::vector<std::shared_ptr<Request>> finished;
  for (Slot& slot : batch) {
    Request& request = *slot.request;
    const std::string& name = request.names[slot.index];
    Answer answer = std::nullopt;
    if (!read.ok()) {
      answer =
          absl::Status(read.status().code(), absl::StrCat("cannot read the cluster record of '",
                                                          name, "': ", read.status().message()));
    } else {
      const KvOpResult& result = read->results[op_of[name]];
      if (!result.values.empty()) {
        absl::StatusOr<NameRecord> record = DecodeNameRecord(options_.prefix, result.values[0]);
        if (record.ok()) {
          answer = *std::move(record);
        } else {
          answer = record.status();
        }
      }
    }
    request.answers[slot.index] = std::move(answer);
    // Slots of one request are answered by this thread or another; the
    // count is only touched under the queue's lock.
    MutexLock lock(&mu_);
    if (--request.left == 0) finished.push_back(slot.request);
  }
  for (const std::shared_ptr<Request>& request : finished) {
    std::move(request->done)(std::move(request->answers));
  }
}

uint64_t RecordReader::names_read() const {
  MutexLock lock(&mu_);
  return names_read_;
}

uint64_t RecordReader::transactions() const {
  MutexLock lock(&mu_);
  return transactions_;
}

}  // namespace tensord
