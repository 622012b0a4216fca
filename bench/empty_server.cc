#include "bench/empty_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/src/channel_arguments.h"
#include "client/src/unary_byte_call.h"
#include "service/transport/server_options.h"
#include "service/wire/byte_buffer_codec.h"
#include "service/wire/channel_arg_milliseconds.h"
#include "tensord/client.h"
#include "tensord/v1/tensor_service.grpc.pb.h"

namespace tensord::bench {
namespace {

// Stat does no work at all; FetchInline answers kPayloadBytes of zeros
// (kept in one slice) whatever is asked, without parsing anything.
class EmptyService final : public v1::TensorService::WithRawCallbackMethod_FetchInline<
                               v1::TensorService::CallbackService> {
 public:
  grpc::ServerUnaryReactor* Stat(grpc::CallbackServerContext* context, const v1::StatRequest*,
                                 v1::StatResponse*) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* FetchInline(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer*,
                                        grpc::ByteBuffer* response) override {
    *response = grpc::ByteBuffer(&payload_, 1);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  grpc::Slice payload_{std::string(kPayloadBytes, '\0')};
};

bool WriteReadyFile(const std::string& path, const std::string& address) {
  const std::string temporary = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << address << "\n";
    if (!out.good()) return false;
  }
  return std::rename(temporary.c_str(), path.c_str()) == 0;
}

}  // namespace

int ServeEmpty(const std::string& address, const std::string& ready_file,
               bool close_idle_connections) {
  // Taken with sigwait below; blocked before gRPC starts its threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // As tensord's main does: the baseline server must not pay for Debian
  // Abseil's mutex deadlock detection in every gRPC lock when tensord does not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  EmptyService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  if (close_idle_connections) {
    // tensord's default --connection-idle-timeout; any value adds the same filter.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               ChannelArgMilliseconds(ConnectionLimits().idle_timeout));
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "tensord-bench --serve-empty: cannot serve on %s\n", address.c_str());
    return 1;
  }
  const std::string bound = absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
  if (!ready_file.empty() && !WriteReadyFile(ready_file, bound)) {
    std::fprintf(stderr, "tensord-bench --serve-empty: cannot write %s\n", ready_file.c_str());
    return 1;
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  server->Shutdown(std::chrono::system_clock::now());
  server->Wait();
  return 0;
}

absl::StatusOr<Operation> MakeEmptyCall(const std::string& target) {
  grpc::ChannelArguments arguments;
  // One TCP connection per caller, as tensord::Client does with own_connection.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments);
  std::shared_ptr<v1::TensorService::Stub> stub = v1::TensorService::NewStub(channel);
  return Operation([stub]() -> absl::Status {
    grpc::ClientContext context;
    v1::StatRequest request;
    v1::StatResponse response;
    grpc::Status status = stub->Stat(&context, request, &response);
    if (!status.ok()) {
      return absl::UnavailableError(absl::StrCat("empty call failed: ", status.error_message()));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<Operation> MakeClientPathEmptyCall(const std::string& target) {
  ClientOptions options;
  options.server = target;
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), ClientChannelArguments(options));
  auto method = std::make_shared<grpc::internal::RpcMethod>(
      "/tensord.v1.TensorService/Stat", grpc::internal::RpcMethod::NORMAL_RPC, channel);
  return Operation([channel, method]() -> absl::Status {
    grpc::ClientContext context;
    grpc::ByteBuffer answer;
    // No name, version 0: no bytes, as an empty StatRequest.
    grpc::Status status = UnaryByteCall(*channel, *method, context, NameVersionRequest{}, answer);
    if (!status.ok()) {
      return absl::UnavailableError(
          absl::StrCat("empty call on the client's path failed: ", status.error_message()));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<Operation> MakePayloadCall(const std::string& target) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments);
  auto method = std::make_shared<grpc::internal::RpcMethod>(
      "/tensord.v1.TensorService/FetchInline", grpc::internal::RpcMethod::NORMAL_RPC, channel);
  return Operation([channel, method]() -> absl::Status {
    grpc::ClientContext context;
    grpc::Slice nothing;
    grpc::ByteBuffer request(&nothing, 1);  // an empty message (a null buffer is refused)
    grpc::ByteBuffer answer;
    grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(), *method, &context, request, &answer);
    if (!status.ok()) {
      return absl::UnavailableError(absl::StrCat("payload call failed: ", status.error_message()));
    }
    if (answer.Length() != kPayloadBytes) {
      return absl::DataLossError(absl::StrCat("payload call answered ", answer.Length(), " bytes"));
    }
    return absl::OkStatus();
  });
}

}  // namespace tensord::bench
