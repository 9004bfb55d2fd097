// Open-loop gRPC load (KServe v2 ModelInfer) for `rankd bench server --protocol grpc`.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <thread>

#include "grpc_service.grpc.pb.h"
#include "tools/load_generator.h"

namespace rankd {
namespace {

using Clock = std::chrono::steady_clock;

struct Call {
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> reader;
  Clock::time_point scheduled;
};

double SecondsAfter(Clock::time_point from, Clock::time_point t) {
  return std::chrono::duration<double>(t - from).count();
}

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

StatusOr<LoadResult> RunGrpcLoad(const LoadOptions& o) {
  std::vector<inference::ModelInferRequest> requests(o.bodies.size());
  for (size_t i = 0; i < o.bodies.size(); ++i) {
    if (!requests[i].ParseFromString(o.bodies[i].bytes))
      return InvalidArgument("body " + std::to_string(i) + " is not a ModelInferRequest");
  }
  // Channels with distinct arguments get distinct connections (gRPC shares a subchannel otherwise).
  std::string address = o.host + ":" + std::to_string(o.port);
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs;
  for (int i = 0; i < std::max(1, o.connections); ++i) {
    grpc::ChannelArguments args;
    args.SetInt("rankd.load_channel", i);
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
      return Unavailable("cannot connect to " + address + " over gRPC");
    }
    stubs.push_back(inference::GRPCInferenceService::NewStub(channel));
  }
  Clock::time_point start = Clock::now() + std::chrono::milliseconds(20);
  Clock::time_point measure_from = start + Seconds(o.warmup_seconds);
  std::vector<Clock::time_point> arrivals = PoissonArrivals(o, start);

  LoadRecorder recorder(o.seconds);
  grpc::CompletionQueue queue;
  // Answers are collected on their own thread so a slow answer never delays the next call.
  std::thread collector([&] {
    for (size_t done = 0; done < arrivals.size(); ++done) {
      void* tag = nullptr;
      bool ok = false;
      if (!queue.Next(&tag, &ok)) return;
      std::unique_ptr<Call> call(static_cast<Call*>(tag));
      double arrival_s = SecondsAfter(measure_from, call->scheduled);
      if (call->status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        recorder.Timeout(arrival_s);
      } else {
        recorder.Answer(arrival_s, SecondsAfter(measure_from, Clock::now()), call->status.error_code(),
                        ok && call->status.ok());
      }
    }
  });
  for (size_t i = 0; i < arrivals.size(); ++i) {
    std::this_thread::sleep_until(arrivals[i]);
    auto call = std::make_unique<Call>();
    call->scheduled = arrivals[i];
    call->context.set_deadline(std::chrono::system_clock::now() + Seconds(o.timeout_seconds) -
                               (Clock::now() - arrivals[i]));
    call->reader =
        stubs[i % stubs.size()]->PrepareAsyncModelInfer(&call->context, requests[i % requests.size()], &queue);
    call->reader->StartCall();
    Call* raw = call.release();  // the collector owns it from here
    raw->reader->Finish(&raw->response, &raw->status, raw);
  }
  collector.join();
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
  return recorder.Summarise(o.rate);
}

}  // namespace rankd
