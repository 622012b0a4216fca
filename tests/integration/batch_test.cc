// BatchPut and BatchFetch against real servers: items that fail only
// themselves, atomic groups that publish whole or not at all and are read
// whole, the per-batch item limit, and tokens checked per item.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/wire/batch_limits.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/raw_stub.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_pki.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

constexpr DLDataType kU8{kDLUInt, 8, 1};

// Host tensors and the batch items that point at them.
struct Batch {
  std::vector<HostTensor> tensors;
  std::vector<BatchPutItem> items;

  void Add(const std::string& name, size_t size, uint64_t seed,
           Retention retention = Retention::kDefault) {
    tensors.push_back(CompactTensor(kU8, {static_cast<int64_t>(size)}, PatternBytes(size, seed)));
    names.push_back(name);
    retentions.push_back(retention);
  }
  // Call once every tensor is added (their DLTensors must not move after).
  std::span<const BatchPutItem> Items() {
    items.clear();
    for (size_t i = 0; i < tensors.size(); ++i) {
      items.push_back(BatchPutItem{names[i], tensors[i].dl(), retentions[i]});
    }
    return items;
  }

  std::vector<std::string> names;
  std::vector<Retention> retentions;
};

class BatchTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({"--max-tensor-bytes=1MiB"}); }

  void Start(std::vector<std::string> flags) {
    ServerProcessOptions options;
    options.flags = std::move(flags);
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = ConnectClient(server_->address(), RemoteClientOptions());
    ASSERT_NE(client_, nullptr);
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(BatchTest, EachItemPublishesOrFailsOnItsOwn) {
  Batch batch;
  batch.Add("b/small", 4096, 1);
  batch.Add("b/too-big", (1 << 20) + 1, 2);  // over --max-tensor-bytes
  batch.Add("b/large", 300 * 1024, 3);       // header and chunks
  batch.Add("b/empty", 0, 4);
  batch.Add("b/cache", 100, 5, Retention::kCache);
  absl::StatusOr<BatchPutResult> put = client_->BatchPut(batch.Items());
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_EQ(put->items.size(), 5u);
  EXPECT_EQ(put->group_version, 0u);
  EXPECT_EQ(put->items[1].status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(MessageMentions(put->items[1].status(), "b/too-big")) << put->items[1].status();
  for (size_t i : {0, 2, 3, 4}) {
    ASSERT_TRUE(put->items[i].ok()) << i << ": " << put->items[i].status();
    EXPECT_EQ(put->items[i]->name, batch.names[i]);
    EXPECT_EQ(put->items[i]->total_bytes, batch.tensors[i].storage.size());
    ExpectInfoOfStored(*client_, *put->items[i]);
  }
  // Each item of a plain batch is its own version, as a Put would be.
  EXPECT_LT(put->items[0]->version, put->items[2]->version);
  EXPECT_EQ(put->items[4]->retention, Retention::kCache);
  EXPECT_EQ(client_->Stat("b/too-big").status().code(), absl::StatusCode::kNotFound);

  const std::vector<TensorRef> wanted = {
      {"b/large", 0},  {"b/missing", 0}, {"b/small", put->items[0]->version},
      {"bad name", 0}, {"b/empty", 0},   {"b/small", 999999}};
  FetchOptions verify;
  verify.verify_crc32c = true;
  absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> fetched = client_->BatchFetch(wanted, verify);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  ASSERT_EQ(fetched->size(), wanted.size());
  ASSERT_TRUE((*fetched)[0].ok()) << (*fetched)[0].status();
  EXPECT_EQ(TensorBytes(*(*fetched)[0]), batch.tensors[2].storage);
  EXPECT_EQ((*fetched)[1].status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE((*fetched)[2].ok()) << (*fetched)[2].status();
  EXPECT_EQ(TensorBytes(*(*fetched)[2]), batch.tensors[0].storage);
  EXPECT_EQ((*fetched)[3].status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*fetched)[4].ok()) << (*fetched)[4].status();
  EXPECT_EQ((*fetched)[4]->info().total_bytes, 0u);
  EXPECT_EQ((*fetched)[5].status().code(), absl::StatusCode::kNotFound);

  // The whole prefix, in name order, from one cut.
  absl::StatusOr<std::vector<Tensor>> all = client_->BatchFetchPrefix("b/");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].info().name, "b/cache");
  EXPECT_EQ((*all)[3].info().name, "b/small");
  EXPECT_EQ(TensorBytes((*all)[3]), batch.tensors[0].storage);
  absl::StatusOr<std::vector<Tensor>> none = client_->BatchFetchPrefix("nothing/");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

// A strided item is packed into the client's own memory before it is sent;
// a large one's chunks and a referenced one's slice point into that copy
// (gRPC may hold them after their write returned), and every item arrives
// whole and compact.
TEST_F(BatchTest, StridedLargeItemsArriveWhole) {
  constexpr int64_t kRows = 1024;
  std::vector<HostTensor> transposed;
  std::vector<std::vector<uint8_t>> expected;
  std::vector<BatchPutItem> items;
  uint64_t seed = 70;
  // 128 KiB (malloc's) and 384 KiB (a mapping of its own), each sent as a
  // header and chunks; 20 and 32 KiB, referenced inside an item message;
  // 8 KiB, copied into it.
  for (const int64_t kCols : {128, 384, 128, 384, 20, 32, 8}) {
    ++seed;
    // The storage holds the tensor column by column: strides {1, kRows}.
    HostTensor tensor = CompactTensor(kU8, {kRows, kCols}, PatternBytes(kRows * kCols, seed));
    tensor.strides = {1, kRows};
    std::vector<uint8_t> compact(tensor.storage.size());
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) compact[r * kCols + c] = tensor.storage[r + c * kRows];
    }
    transposed.push_back(std::move(tensor));
    expected.push_back(std::move(compact));
  }
  for (size_t i = 0; i < transposed.size(); ++i) {
    items.push_back({absl::StrCat("strided/", i), transposed[i].dl()});
  }
  absl::StatusOr<BatchPutResult> put = client_->BatchPut(items);
  ASSERT_TRUE(put.ok()) << put.status();
  for (size_t i = 0; i < items.size(); ++i) {
    ASSERT_TRUE(put->items[i].ok()) << put->items[i].status();
    absl::StatusOr<Tensor> fetched = client_->Fetch(items[i].name);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    std::vector<uint8_t> bytes = TensorBytes(*fetched);
    EXPECT_TRUE(BytesEqual(bytes.data(), bytes.size(), expected[i])) << items[i].name;
  }
}

// Items on both sides of kMinReferencedBatchItemBytes (copied into their
// message, or referenced where they lie: the client's tensor on a put, the
// stored version on a fetch) and past kMaxInlineBatchItemBytes (chunks),
// mixed in the same messages with failed items, arrive byte-exact both
// ways.
TEST_F(BatchTest, ItemsCopiedAndReferencedInOneMessageArriveByteExact) {
  const std::vector<uint64_t> sizes = {100,
                                       kMinReferencedBatchItemBytes - 1,
                                       kMinReferencedBatchItemBytes,
                                       kMinReferencedBatchItemBytes + 1,
                                       40000,
                                       kMaxInlineBatchItemBytes,
                                       kMaxInlineBatchItemBytes + 1,
                                       0};
  Batch batch;
  for (int i = 0; i < 48; ++i) {
    batch.Add(absl::StrCat("mixed/", i), sizes[i % sizes.size()], 200 + i);
  }
  absl::StatusOr<BatchPutResult> put = client_->BatchPut(batch.Items());
  ASSERT_TRUE(put.ok()) << put.status();
  for (size_t i = 0; i < put->items.size(); ++i) {
    ASSERT_TRUE(put->items[i].ok()) << i << ": " << put->items[i].status();
    EXPECT_EQ(put->items[i]->total_bytes, batch.tensors[i].storage.size());
  }
  ExpectInfoOfStored(*client_, *put->items[2]);
  std::vector<TensorRef> wanted;
  for (size_t i = 0; i < batch.names.size(); ++i) {
    wanted.push_back({batch.names[i], 0});
    if (i % 5 == 0) wanted.push_back({absl::StrCat("mixed/missing/", i), 0});
  }
  FetchOptions verify;
  verify.verify_crc32c = true;
  absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> fetched = client_->BatchFetch(wanted, verify);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  ASSERT_EQ(fetched->size(), wanted.size());
  size_t item = 0;
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (absl::StartsWith(wanted[i].name, "mixed/missing/")) {
      EXPECT_EQ((*fetched)[i].status().code(), absl::StatusCode::kNotFound) << wanted[i].name;
      continue;
    }
    ASSERT_TRUE((*fetched)[i].ok()) << wanted[i].name << ": " << (*fetched)[i].status();
    EXPECT_EQ(TensorBytes(*(*fetched)[i]), batch.tensors[item].storage) << wanted[i].name;
    ++item;
  }
  // The same items again while the first answer's tensors are still held.
  absl::StatusOr<std::vector<Tensor>> all = client_->BatchFetchPrefix("mixed/");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), batch.names.size());
  for (const Tensor& tensor : *all) {
    const size_t index =
        std::find(batch.names.begin(), batch.names.end(), tensor.info().name) - batch.names.begin();
    ASSERT_LT(index, batch.names.size()) << tensor.info().name;
    EXPECT_EQ(TensorBytes(tensor), batch.tensors[index].storage) << tensor.info().name;
  }
}

TEST_F(BatchTest, AnAtomicBatchPublishesWholeOrNotAtAll) {
  Batch bad;
  bad.Add("model/w0", 1000, 1);
  bad.Add("model/w1", (1 << 20) + 1, 2);
  bad.Add("model/w2", 200 * 1024, 3);
  BatchPutOptions atomic;
  atomic.atomic = true;
  absl::StatusOr<BatchPutResult> refused = client_->BatchPut(bad.Items(), atomic);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->group_version, 0u);
  EXPECT_EQ(refused->items[1].status().code(), absl::StatusCode::kResourceExhausted);
  for (size_t i : {0, 2}) {
    EXPECT_EQ(refused->items[i].status().code(), absl::StatusCode::kAborted) << i;
    EXPECT_TRUE(MessageMentions(refused->items[i].status(), "model/w1"))
        << refused->items[i].status();
  }
  absl::StatusOr<ListResult> listed = client_->List("model/");
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->tensors.empty());

  Batch good;
  good.Add("model/w0", 1000, 11);
  good.Add("model/w1", 4096, 12);
  good.Add("model/w2", 200 * 1024, 13);
  absl::StatusOr<BatchPutResult> first = client_->BatchPut(good.Items(), atomic);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_NE(first->group_version, 0u);
  for (const auto& item : first->items) {
    ASSERT_TRUE(item.ok()) << item.status();
    EXPECT_EQ(item->version, first->group_version);
  }
  absl::StatusOr<std::vector<Tensor>> group = client_->BatchFetchGroup(first->group_version);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(group->size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(TensorBytes((*group)[i]), good.tensors[i].storage);

  // Republished: the old group is gone once nobody holds it; the new one is whole.
  Batch next;
  next.Add("model/w0", 1000, 21);
  next.Add("model/w1", 4096, 22);
  next.Add("model/w2", 200 * 1024, 23);
  absl::StatusOr<BatchPutResult> second = client_->BatchPut(next.Items(), atomic);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GT(second->group_version, first->group_version);
  absl::Status old = client_->BatchFetchGroup(first->group_version).status();
  EXPECT_EQ(old.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(MessageMentions(old, "no longer whole")) << old;
  absl::StatusOr<std::vector<Tensor>> latest = client_->BatchFetchPrefix("model/");
  ASSERT_TRUE(latest.ok()) << latest.status();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*latest)[i].info().version, second->group_version);
    EXPECT_EQ(TensorBytes((*latest)[i]), next.tensors[i].storage);
  }
  EXPECT_EQ(client_->BatchFetchGroup(second->group_version + 1000).status().code(),
            absl::StatusCode::kNotFound);
  // Cluster groups are numbered by etcd: a single node has none.
  EXPECT_EQ(second->cluster_group, 0u);
  absl::Status clusterless = client_->BatchFetchClusterGroup(second->group_version).status();
  EXPECT_EQ(clusterless.code(), absl::StatusCode::kFailedPrecondition) << clusterless;
  EXPECT_TRUE(MessageMentions(clusterless, "not a cluster node")) << clusterless;

  // One name twice cannot be one group.
  Batch twice;
  twice.Add("model/w0", 10, 1);
  twice.Add("model/w0", 10, 2);
  absl::StatusOr<BatchPutResult> duplicate = client_->BatchPut(twice.Items(), atomic);
  ASSERT_TRUE(duplicate.ok()) << duplicate.status();
  EXPECT_EQ(duplicate->items[0].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageMentions(duplicate->items[0].status(), "appears twice"));
}

// A reader fetching the group's prefix while a writer republishes it never
// sees items from two versions.
TEST_F(BatchTest, ReadersNeverSeeHalfOfAGroup) {
  constexpr int kItems = 6;
  constexpr int kRounds = 60;
  auto publish = [&](int round) {
    Batch batch;
    for (int i = 0; i < kItems; ++i) {
      batch.Add(absl::StrCat("weights/", i), i == 0 ? 100 * 1024 : 2048, round);
    }
    BatchPutOptions atomic;
    atomic.atomic = true;
    absl::StatusOr<BatchPutResult> put = client_->BatchPut(batch.Items(), atomic);
    ASSERT_TRUE(put.ok()) << put.status();
    ASSERT_NE(put->group_version, 0u) << put->items[0].status();
  };
  publish(0);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int round = 1; round <= kRounds; ++round) publish(round);
    done = true;
  });
  std::unique_ptr<Client> reader = ConnectClient(server_->address(), RemoteClientOptions());
  ASSERT_NE(reader, nullptr);
  int reads = 0;
  int torn = 0;
  while ((!done || reads == 0) && reads < 5000) {
    absl::StatusOr<std::vector<Tensor>> items = reader->BatchFetchPrefix("weights/");
    ASSERT_TRUE(items.ok()) << items.status();
    ASSERT_EQ(items->size(), static_cast<size_t>(kItems));
    // Every item's bytes follow the same round's pattern.
    int rounds_matched = 0;
    for (int round = 0; round <= kRounds; ++round) {
      if (TensorBytes((*items)[1]) != PatternBytes(2048, round)) continue;
      ++rounds_matched;
      for (int i = 0; i < kItems; ++i) {
        if ((*items)[i].info().version != (*items)[0].info().version ||
            TensorBytes((*items)[i]) != PatternBytes(i == 0 ? 100 * 1024 : 2048, round)) {
          ++torn;
        }
      }
    }
    ASSERT_EQ(rounds_matched, 1) << "read " << reads;
    ++reads;
  }
  writer.join();
  EXPECT_EQ(torn, 0) << "in " << reads << " reads";
}

// More items than one batch takes: BatchPut splits them into calls, and a
// prefix that matches more than one batch holds is refused, naming the limit.
TEST_F(BatchTest, TheItemLimitSplitsPutsAndRefusesOverlongPrefixes) {
  const size_t count = kMaxBatchItems + 10;
  std::vector<uint8_t> byte = {7};
  HostTensor one = CompactTensor(kU8, {1}, byte);
  std::vector<std::string> names;
  names.reserve(count);
  std::vector<BatchPutItem> items;
  items.reserve(count);
  for (size_t i = 0; i < count; ++i) names.push_back(absl::StrCat("many/", i));
  for (size_t i = 0; i < count; ++i) items.push_back(BatchPutItem{names[i], one.dl()});
  uint64_t last_progress = 0;
  BatchPutOptions options;
  options.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_EQ(total, count);
    last_progress = done;
  };
  absl::StatusOr<BatchPutResult> put = client_->BatchPut(items, options);
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_EQ(put->items.size(), count);
  EXPECT_EQ(last_progress, count);
  for (size_t i = 0; i < count; i += 4099) EXPECT_TRUE(put->items[i].ok()) << i;
  EXPECT_TRUE(put->items.back().ok()) << put->items.back().status();

  absl::Status over = client_->BatchFetchPrefix("many/").status();
  EXPECT_EQ(over.code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(MessageMentions(over, absl::StrCat("more than ", kMaxBatchItems))) << over;

  std::vector<TensorRef> wanted;
  for (size_t i = 0; i < count; ++i) wanted.push_back({names[i], 0});
  absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> fetched = client_->BatchFetch(wanted);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  ASSERT_EQ(fetched->size(), count);
  for (size_t i = 0; i < count; i += 997) {
    ASSERT_TRUE((*fetched)[i].ok()) << i << ": " << (*fetched)[i].status();
    EXPECT_EQ(TensorBytes(*(*fetched)[i]), byte);
  }
  // Bad names in both calls fail alone; every other answer keeps its place.
  const std::vector<size_t> bad = {5, kMaxBatchItems - 1, kMaxBatchItems + 3};
  for (size_t i : bad) wanted[i].name = "bad//name";
  fetched = client_->BatchFetch(wanted);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  ASSERT_EQ(fetched->size(), count);
  for (size_t i : bad) EXPECT_EQ((*fetched)[i].status().code(), absl::StatusCode::kInvalidArgument);
  for (size_t i : {size_t{0}, size_t{6}, kMaxBatchItems - 2, kMaxBatchItems, count - 1}) {
    ASSERT_TRUE((*fetched)[i].ok()) << i << ": " << (*fetched)[i].status();
    EXPECT_EQ((*fetched)[i]->info().name, names[i]);
  }

  BatchPutOptions atomic;
  atomic.atomic = true;
  absl::Status too_many = client_->BatchPut(items, atomic).status();
  EXPECT_EQ(too_many.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageMentions(too_many, absl::StrCat(kMaxBatchItems))) << too_many;
}

// What the C++ client never sends, through gRPC's generated client class.
v1::BatchPutRequest RawItemHeader(const std::string& name, uint64_t bytes) {
  v1::BatchPutRequest message;
  *message.mutable_header() =
      HeaderMessage(name, RawDataType(kDLUInt, 8), {static_cast<int64_t>(bytes)}, bytes).header();
  return message;
}

v1::BatchPutRequest RawChunk(uint64_t offset, const std::string& data) {
  v1::BatchPutRequest message;
  message.mutable_chunk()->set_offset(offset);
  message.mutable_chunk()->set_data(data);
  return message;
}

grpc::Status RawBatchPut(RawStub& service, const std::vector<v1::BatchPutRequest>& messages,
                         v1::BatchPutResponse* response) {
  std::unique_ptr<grpc::ClientContext> context = RawContext();
  std::unique_ptr<grpc::ClientWriter<v1::BatchPutRequest>> writer =
      service.BatchPut(context.get(), response);
  for (const v1::BatchPutRequest& message : messages) {
    if (!writer->Write(message)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

TEST_F(BatchTest, MalformedStreamsFailTheCallAndBadItemsOnlyThemselves) {
  std::unique_ptr<RawStub> service = NewRawStub(server_->address());
  v1::BatchPutResponse response;
  grpc::Status status = RawBatchPut(*service, {RawChunk(0, "x")}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("belongs to no item"), std::string::npos)
      << status.error_message();

  v1::BatchPutRequest options;
  options.mutable_options()->set_atomic(true);
  status = RawBatchPut(*service, {RawItemHeader("raw/x", 0), options}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("first message"), std::string::npos)
      << status.error_message();

  // A complete item, then one cut short: the call fails, the first stays.
  status = RawBatchPut(*service,
                       {RawItemHeader("raw/whole", 4), RawChunk(0, "abcd"),
                        RawItemHeader("raw/cut", 8), RawChunk(0, "abc")},
                       &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("'raw/cut') ended after 3 of 8"), std::string::npos)
      << status.error_message();
  EXPECT_TRUE(client_->Stat("raw/whole").ok());
  EXPECT_EQ(client_->Stat("raw/cut").status().code(), absl::StatusCode::kNotFound);

  // Bad items inside a well-formed stream fail alone.
  v1::BatchPutRequest items;
  v1::BatchPutItem* short_item = items.mutable_items()->add_items();
  *short_item->mutable_header() = RawItemHeader("raw/short", 10).header();
  short_item->set_data("12345");
  v1::BatchPutItem* bad_crc = items.mutable_items()->add_items();
  *bad_crc->mutable_header() = RawItemHeader("raw/crc", 3).header();
  bad_crc->mutable_header()->set_crc32c(12345);
  bad_crc->set_data("abc");
  v1::BatchPutItem* good = items.mutable_items()->add_items();
  *good->mutable_header() = RawItemHeader("raw/good", 3).header();
  good->set_data("xyz");
  status = RawBatchPut(*service, {items}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.items_size(), 3);
  EXPECT_EQ(response.items(0).status().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(response.items(0).status().message().find("carries 5"), std::string::npos);
  EXPECT_EQ(response.items(1).status().code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_EQ(response.items(2).status().code(), 0);
  EXPECT_NE(response.items(2).version(), 0u);

  // A batch fetch chooses by exactly one of items, prefix, group and
  // cluster group.
  v1::BatchFetchRequest two_ways;
  two_ways.add_items()->set_name("raw/good");
  two_ways.set_prefix("raw/");
  std::unique_ptr<grpc::ClientContext> context = RawContext();
  std::unique_ptr<grpc::ClientReader<v1::BatchFetchResponse>> reader =
      service->BatchFetch(context.get(), two_ways);
  v1::BatchFetchResponse ignored;
  while (reader->Read(&ignored)) {
  }
  status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(
      status.error_message().find("exactly one of items, prefix, group_version and cluster_group"),
      std::string::npos)
      << status.error_message();
  v1::BatchFetchRequest both_groups;
  both_groups.set_group_version(3);
  both_groups.set_cluster_group(7);
  context = RawContext();
  reader = service->BatchFetch(context.get(), both_groups);
  while (reader->Read(&ignored)) {
  }
  status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("group 3, cluster group 7"), std::string::npos)
      << status.error_message();
  // A cluster group is an etcd revision: at most 2^63-1.
  v1::BatchFetchRequest too_far;
  too_far.set_cluster_group(uint64_t{1} << 63);
  context = RawContext();
  reader = service->BatchFetch(context.get(), too_far);
  while (reader->Read(&ignored)) {
  }
  status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("9223372036854775808"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("at most 2^63-1"), std::string::npos)
      << status.error_message();
}

// The answer to a batch carries a status per item; when every one of
// 65,536 items fails with a long message, the messages are cut and then
// left out, so the answer still fits a gRPC message (8 MiB by default).
TEST(BatchLimitTest, AnswersForManyFailingItemsStayWithinOneMessage) {
  ServerProcessOptions options;
  options.flags = {"--max-tensor-bytes=1"};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<Client> client = ConnectClient((*server)->address(), RemoteClientOptions());
  ASSERT_NE(client, nullptr);
  HostTensor two_bytes = CompactTensor(kU8, {2}, PatternBytes(2, 1));
  const std::string long_part(200, 'n');
  std::vector<std::string> names;
  std::vector<BatchPutItem> items;
  names.reserve(kMaxBatchItems);
  for (size_t i = 0; i < kMaxBatchItems; ++i) names.push_back(absl::StrCat("big/", long_part, i));
  for (const std::string& name : names) items.push_back(BatchPutItem{name, two_bytes.dl()});
  absl::StatusOr<BatchPutResult> put = client->BatchPut(items);
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_EQ(put->items.size(), kMaxBatchItems);
  size_t named = 0;
  for (const auto& item : put->items) {
    ASSERT_EQ(item.status().code(), absl::StatusCode::kResourceExhausted) << item.status();
    named += absl::StrContains(item.status().message(), "--max-tensor-bytes") ? 1 : 0;
  }
  EXPECT_GT(named, 1000u);           // the first ones say why
  EXPECT_LT(named, kMaxBatchItems);  // the rest only their code
  EXPECT_TRUE(MessageMentions(put->items.back().status(), "left out"))
      << put->items.back().status();
}

TEST(BatchAuthTest, TokensAreCheckedPerItem) {
  constexpr char kAdmin[] = "admin-token-0123456789abcdef";
  constexpr char kTeamA[] = "team-a-token-0123456789abcdef";
  TempDir dir;
  WriteFile(dir.File("tokens"), absl::StrCat(kAdmin, " admin\n", kTeamA, " read,write team-a/\n"));
  ServerProcessOptions options;
  options.flags = {"--tokens-file=" + dir.File("tokens")};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto connect = [&](const char* token) {
    return ConnectClient((*server)->address(), RemoteClientOptions(token));
  };
  std::unique_ptr<Client> admin = connect(kAdmin);
  std::unique_ptr<Client> team_a = connect(kTeamA);
  ASSERT_NE(admin, nullptr);
  ASSERT_NE(team_a, nullptr);

  Batch batch;
  batch.Add("team-a/x", 64, 1);
  batch.Add("team-b/y", 64, 2);
  absl::StatusOr<BatchPutResult> put = team_a->BatchPut(batch.Items());
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_TRUE(put->items[0].ok()) << put->items[0].status();
  EXPECT_EQ(put->items[1].status().code(), absl::StatusCode::kPermissionDenied);

  BatchPutOptions atomic;
  atomic.atomic = true;
  absl::StatusOr<BatchPutResult> group = admin->BatchPut(batch.Items(), atomic);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_NE(group->group_version, 0u) << group->items[0].status();
  // A group with a name the token may not read is refused whole.
  EXPECT_EQ(team_a->BatchFetchGroup(group->group_version).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(admin->BatchFetchGroup(group->group_version).ok());
  const std::vector<TensorRef> wanted = {{"team-a/x", 0}, {"team-b/y", 0}};
  absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> fetched = team_a->BatchFetch(wanted);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_TRUE((*fetched)[0].ok());
  EXPECT_EQ((*fetched)[1].status().code(), absl::StatusCode::kPermissionDenied);
  // A prefix outside the token's namespace is refused; an empty one means its own.
  absl::Status outside = team_a->BatchFetchPrefix("team-b/").status();
  EXPECT_EQ(outside.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(MessageMentions(outside, "BatchFetch of prefix 'team-b/'")) << outside;
  absl::StatusOr<std::vector<Tensor>> own = team_a->BatchFetchPrefix("");
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_EQ(own->size(), 1u);
  EXPECT_EQ((*own)[0].info().name, "team-a/x");
}

}  // namespace
}  // namespace tensord::testing
