// The client's routing rule as tables: every call kind under every
// transfer path, with and without a local handoff connection, and what
// follows each kind of local answer.
#include "client/src/call_routing.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

using ::testing::HasSubstr;

std::string PathName(TransferPath path) {
  switch (path) {
    case TransferPath::kAuto: return "kAuto";
    case TransferPath::kRemote: return "kRemote";
    case TransferPath::kLocal: return "kLocal";
  }
  return "?";
}

struct RouteRow {
  RoutedCall call;
  TransferPath path;
  bool local_found;
  // Expected: a transport, or an error code with a part of its message.
  std::optional<Transport> transport;
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string message = "";
};

RoutedCall Put(bool device, uint32_t replicas) {
  std::string what = "put of 'w'";
  if (device) what += " into device memory (device type 2, id 0)";
  return {.kind = CallKind::kPut, .device_put = device, .replicas = replicas, .what = what};
}
RoutedCall Kind(CallKind kind) { return {.kind = kind}; }

constexpr char kNoSocket[] = "the server has local handoff turned off";

TEST(CallRoutingTest, EveryCallUnderEveryPathWithAndWithoutALocalConnection) {
  constexpr auto kAuto = TransferPath::kAuto;
  constexpr auto kRemote = TransferPath::kRemote;
  constexpr auto kLocal = TransferPath::kLocal;
  constexpr auto kUnavailable = absl::StatusCode::kUnavailable;
  constexpr auto kPrecondition = absl::StatusCode::kFailedPrecondition;
  const std::vector<RouteRow> rows = {
      // A plain put, a fetch, a batch fetch and a create: local when found.
      {Put(false, 1), kAuto, true, Transport::kLocal},
      {Put(false, 1), kAuto, false, Transport::kRemote},
      {Put(false, 1), kRemote, true, Transport::kRemote},
      {Put(false, 1), kLocal, true, Transport::kLocal},
      {Put(false, 1), kLocal, false, std::nullopt, kUnavailable, kNoSocket},
      {Kind(CallKind::kFetch), kAuto, true, Transport::kLocal},
      {Kind(CallKind::kFetch), kAuto, false, Transport::kRemote},
      {Kind(CallKind::kFetch), kRemote, true, Transport::kRemote},
      {Kind(CallKind::kFetch), kLocal, false, std::nullopt, kUnavailable, kNoSocket},
      {Kind(CallKind::kBatchFetch), kAuto, true, Transport::kLocal},
      {Kind(CallKind::kBatchFetch), kRemote, true, Transport::kRemote},
      {Kind(CallKind::kBatchFetch), kLocal, false, std::nullopt, kUnavailable, kNoSocket},
      {Kind(CallKind::kBatchPut), kAuto, true, Transport::kLocal},
      {Kind(CallKind::kBatchPut), kAuto, false, Transport::kRemote},
      {Kind(CallKind::kBatchPut), kRemote, true, Transport::kRemote},
      {Kind(CallKind::kBatchPut), kLocal, true, Transport::kLocal},
      {Kind(CallKind::kBatchPut), kLocal, false, std::nullopt, kUnavailable, kNoSocket},
      {Kind(CallKind::kCreate), kAuto, true, Transport::kLocal},
      {Kind(CallKind::kCreate), kAuto, false, Transport::kRemote},  // which names the socket
      {Kind(CallKind::kCreate), kLocal, false, std::nullopt, kUnavailable, kNoSocket},
      // Copies and device memory are made by the server after a gRPC put.
      {Put(true, 1), kAuto, true, Transport::kRemote},
      {Put(true, 1), kRemote, false, Transport::kRemote},
      {Put(true, 1), kLocal, true, std::nullopt, kPrecondition,
       "put of 'w' into device memory (device type 2, id 0) needs TransferPath::kRemote or kAuto"},
      {Put(false, 3), kAuto, true, Transport::kRemote},
      {Put(false, 3), kLocal, true, std::nullopt, kPrecondition,
       "put of 'w' with replicas=3 needs TransferPath::kRemote or kAuto"},
      // SealGroup seals local creates: only local, whatever the path.
      {Kind(CallKind::kSealGroup), kAuto, true, Transport::kLocal},
      {Kind(CallKind::kSealGroup), kLocal, true, Transport::kLocal},
      {Kind(CallKind::kSealGroup), kAuto, false, std::nullopt, kUnavailable,
       "SealGroup seals local creates, and this client has no local handoff connection: "},
      {Kind(CallKind::kSealGroup), kRemote, false, std::nullopt, kUnavailable, kNoSocket},
      // Calls only gRPC serves, even under kLocal.
      {Kind(CallKind::kGrpcOnly), kAuto, true, Transport::kRemote},
      {Kind(CallKind::kGrpcOnly), kLocal, true, Transport::kRemote},
      {Kind(CallKind::kGrpcOnly), kLocal, false, Transport::kRemote},
  };
  for (const RouteRow& row : rows) {
    SCOPED_TRACE(absl::StrCat("kind ", static_cast<int>(row.call.kind), " ", row.call.what,
                              " replicas ", row.call.replicas, " under ", PathName(row.path),
                              row.local_found ? ", connection found" : ", no connection"));
    const absl::StatusOr<Transport> routed = RouteCall(row.call, row.path, [&]() -> absl::Status {
      if (row.local_found) return absl::OkStatus();
      return absl::UnavailableError(absl::StrCat(kNoSocket, " (--handoff-socket)"));
    });
    if (row.transport.has_value()) {
      ASSERT_TRUE(routed.ok()) << routed.status();
      EXPECT_EQ(*routed, *row.transport);
    } else {
      ASSERT_FALSE(routed.ok());
      EXPECT_EQ(routed.status().code(), row.code) << routed.status();
      EXPECT_THAT(routed.status().message(), HasSubstr(row.message));
    }
  }
}

// Looking for the socket costs a GetServerInfo and a connect: a call that
// cannot use it never looks.
TEST(CallRoutingTest, OnlyCallsThatCanUseTheSocketLookForIt) {
  struct Row {
    RoutedCall call;
    TransferPath path;
    bool looks;
  };
  for (const Row& row : {Row{Kind(CallKind::kGrpcOnly), TransferPath::kAuto, false},
                         Row{Kind(CallKind::kGrpcOnly), TransferPath::kLocal, false},
                         Row{Kind(CallKind::kFetch), TransferPath::kRemote, false},
                         Row{Put(true, 1), TransferPath::kAuto, false},
                         Row{Put(false, 2), TransferPath::kLocal, false},
                         Row{Kind(CallKind::kFetch), TransferPath::kAuto, true},
                         Row{Kind(CallKind::kCreate), TransferPath::kLocal, true},
                         Row{Kind(CallKind::kSealGroup), TransferPath::kRemote, true}}) {
    SCOPED_TRACE(
        absl::StrCat("kind ", static_cast<int>(row.call.kind), " under ", PathName(row.path)));
    int looked = 0;
    (void)RouteCall(row.call, row.path, [&] {
      ++looked;
      return absl::OkStatus();
    });
    EXPECT_EQ(looked, row.looks ? 1 : 0);
  }
}

TEST(CallRoutingTest, WhatFollowsALocalAnswer) {
  const absl::Status use_remote = MarkUseRemote(absl::FailedPreconditionError("host bytes"));
  const absl::Status broken = absl::UnavailableError("handoff socket closed");
  const absl::Status answered = MarkServerAnswer(absl::UnavailableError("cluster unreachable"));
  const absl::Status not_found = absl::NotFoundError("no tensor 'x'");
  struct Row {
    CallKind kind;
    TransferPath path;
    absl::Status answer;
    AfterLocal expected;
  };
  constexpr auto kAuto = TransferPath::kAuto;
  for (const Row& row : {
           Row{CallKind::kFetch, kAuto, absl::OkStatus(), AfterLocal::kStands},
           Row{CallKind::kFetch, kAuto, use_remote, AfterLocal::kRetryRemote},
           Row{CallKind::kFetch, kAuto, broken, AfterLocal::kForgetLocalAndRetry},
           Row{CallKind::kFetch, kAuto, answered, AfterLocal::kStands},
           Row{CallKind::kFetch, kAuto, not_found, AfterLocal::kStands},
           Row{CallKind::kPut, kAuto, broken, AfterLocal::kForgetLocalAndRetry},
           Row{CallKind::kBatchFetch, kAuto, use_remote, AfterLocal::kRetryRemote},
           // No gRPC path: the local answer is the answer.
           Row{CallKind::kCreate, kAuto, broken, AfterLocal::kStands},
           Row{CallKind::kCreate, kAuto, use_remote, AfterLocal::kStands},
           Row{CallKind::kSealGroup, kAuto, broken, AfterLocal::kStands},
           // Only kAuto falls back.
           Row{CallKind::kFetch, TransferPath::kLocal, broken, AfterLocal::kStands},
           Row{CallKind::kFetch, TransferPath::kLocal, use_remote, AfterLocal::kStands},
           // A batch put only gRPC can do (a cluster's, an atomic one beyond
           // one request) published nothing: gRPC takes it under kLocal too,
           // as it took every batch put before the handoff had one.
           Row{CallKind::kBatchPut, kAuto, use_remote, AfterLocal::kRetryRemote},
           Row{CallKind::kBatchPut, TransferPath::kLocal, use_remote, AfterLocal::kRetryRemote},
           Row{CallKind::kBatchPut, kAuto, broken, AfterLocal::kForgetLocalAndRetry},
           Row{CallKind::kBatchPut, TransferPath::kLocal, broken, AfterLocal::kStands},
           Row{CallKind::kBatchPut, kAuto, answered, AfterLocal::kStands},
       }) {
    SCOPED_TRACE(absl::StrCat("kind ", static_cast<int>(row.kind), " under ", PathName(row.path),
                              ": ", row.answer.ToString()));
    EXPECT_EQ(AfterLocalAnswer(row.kind, row.path, row.answer), row.expected);
  }
}

// A batch is routed by its first item only gRPC can serve, so kAuto fetches
// the whole batch over gRPC rather than mixing the two paths' cuts.
TEST(CallRoutingTest, ABatchIsRoutedByAnItemOnlyGrpcCanServe) {
  using Items = std::vector<absl::StatusOr<Tensor>>;
  Items items;
  items.emplace_back(absl::NotFoundError("no tensor 'a'"));
  EXPECT_TRUE(RoutingStatus(absl::StatusOr<Items>(std::move(items))).ok());
  Items mixed;
  mixed.emplace_back(absl::NotFoundError("no tensor 'a'"));
  mixed.emplace_back(MarkUseRemote(absl::FailedPreconditionError("device tensor 'b'")));
  const absl::Status routed = RoutingStatus(absl::StatusOr<Items>(std::move(mixed)));
  EXPECT_TRUE(IsUseRemote(routed)) << routed;
  EXPECT_EQ(AfterLocalAnswer(CallKind::kBatchFetch, TransferPath::kAuto, routed),
            AfterLocal::kRetryRemote);
  EXPECT_EQ(RoutingStatus(absl::StatusOr<Items>(absl::UnavailableError("gone"))).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tensord
