// EncodeBatchPutAnswer writes byte for byte what the generated serializer
// writes for the same BatchPutResponse (the server built it as messages,
// a status only for a failure).
#include "service/wire/batch_put_answer.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tensord/v1/tensor_service.pb.h"
#include "tests/unit/grpc_buffer_bytes.h"

namespace tensord {
namespace {

std::string Generated(const std::vector<BatchPutItemOutcome>& items, uint64_t group_version,
                      uint64_t cluster_group) {
  v1::BatchPutResponse response;
  response.set_group_version(group_version);
  response.set_cluster_group(cluster_group);
  for (const BatchPutItemOutcome& result : items) {
    v1::BatchPutItemResult* item = response.add_items();
    item->set_version(result.version);
    item->set_crc32c(result.crc32c);
    item->set_created_unix_nanos(result.created_unix_nanos);
    if (result.code != absl::StatusCode::kOk) {
      item->mutable_status()->set_code(static_cast<int32_t>(result.code));
      item->mutable_status()->set_message(result.message);
    }
  }
  return response.SerializeAsString();
}

BatchPutItemOutcome Outcome(absl::StatusCode code, std::string message, uint64_t version,
                            uint32_t crc32c, int64_t created) {
  BatchPutItemOutcome outcome;
  outcome.code = code;
  outcome.message = std::move(message);
  outcome.version = version;
  outcome.crc32c = crc32c;
  outcome.created_unix_nanos = created;
  return outcome;
}

TEST(BatchPutAnswerTest, WritesWhatTheGeneratedSerializerWrites) {
  const std::vector<BatchPutItemOutcome> items = {
      Outcome(absl::StatusCode::kOk, "", 1, 0xdeadbeef, 1'700'000'000'000'000'000),
      Outcome(absl::StatusCode::kOk, "", 0, 0, 0),  // every field zero: an empty item
      Outcome(absl::StatusCode::kInvalidArgument, "tensor name 'a//b' has an empty segment", 0, 0,
              0),
      Outcome(absl::StatusCode::kDataLoss, "", 0, 0, 0),  // message cut by the budget
      Outcome(absl::StatusCode::kResourceExhausted, std::string(300, 'm'), 7, 9, -1),
      Outcome(absl::StatusCode::kOk, "", std::numeric_limits<uint64_t>::max(),
              std::numeric_limits<uint32_t>::max(), std::numeric_limits<int64_t>::min()),
  };
  for (uint64_t group : {uint64_t{0}, uint64_t{5}, uint64_t{1} << 63}) {
    for (uint64_t cluster : {uint64_t{0}, uint64_t{300}}) {
      EXPECT_EQ(BufferBytes(EncodeBatchPutAnswer(items, group, cluster)),
                Generated(items, group, cluster));
      EXPECT_EQ(BufferBytes(EncodeBatchPutAnswer({}, group, cluster)),
                Generated({}, group, cluster));
    }
  }
  std::vector<BatchPutItemOutcome> many;
  for (int i = 0; i < 65536; ++i) {
    many.push_back(Outcome(i % 97 == 0 ? absl::StatusCode::kNotFound : absl::StatusCode::kOk,
                           i % 194 == 0 ? "gone" : "", static_cast<uint64_t>(i) * 1000003,
                           static_cast<uint32_t>(i) * 2654435761u, int64_t{i} << 32));
  }
  EXPECT_EQ(BufferBytes(EncodeBatchPutAnswer(many, 0, 0)), Generated(many, 0, 0));
}

}  // namespace
}  // namespace tensord
