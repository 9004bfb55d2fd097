// Open-loop gRPC load (KServe v2 ModelInfer) for `rankd bench server --protocol grpc`. Requests
// go out as the bytes they were read as (a generic stub): a call shares its request's slices and
// serialises nothing, so one sending thread keeps up with W1's 476 KB requests at the rates the
// server is measured at (with the typed stub each call serialised its request again, and the
// client fell behind near 7,000 W1 requests/s).
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "frontend/grpc_mutexes.h"
#include "grpc_service.grpc.pb.h"
#include "tools/load_generator.h"

namespace rankd {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";

struct Call {
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
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
  TurnOffMutexDeadlockDetection();  // the client's gRPC locks as the server's (frontend/grpc_mutexes.h)
  std::vector<grpc::ByteBuffer> requests;
  for (size_t i = 0; i < o.bodies.size(); ++i) {
    inference::ModelInferRequest check;
    if (!check.ParseFromString(o.bodies[i].bytes))
      return InvalidArgument("body " + std::to_string(i) + " is not a ModelInferRequest");
    grpc::Slice bytes(o.bodies[i].bytes);
    requests.emplace_back(&bytes, 1);
  }
  // Channels with distinct arguments get distinct connections (gRPC shares a subchannel otherwise).
  std::string address = o.host + ":" + std::to_string(o.port);
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  for (int i = 0; i < std::max(1, o.connections); ++i) {
    grpc::ChannelArguments args;
    args.SetInt("rankd.load_channel", i);
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
      return Unavailable("cannot connect to " + address + " over gRPC");
    }
    stubs.push_back(std::make_unique<grpc::GenericStub>(channel));
  }
  Clock::time_point start = Clock::now() + std::chrono::milliseconds(20);
  Clock::time_point measure_from = start + Seconds(o.warmup_seconds);
  // `threads` senders, each with its share of the rate (ShareOf); every sender uses every channel.
  const int senders = std::clamp(o.threads, 1, 64);
  std::vector<std::vector<Clock::time_point>> arrivals;
  size_t total = 0;
  for (int k = 0; k < senders; ++k) {
    arrivals.push_back(PoissonArrivals(ShareOf(o, k, senders), start));
    total += arrivals.back().size();
  }

  LoadRecorder recorder(o.seconds);
  grpc::CompletionQueue queue;
  // Answers are collected on their own thread so a slow answer never delays the next call.
  std::thread collector([&] {
    for (size_t done = 0; done < total; ++done) {
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
  auto send = [&](int k) {
    const std::vector<Clock::time_point>& mine = arrivals[static_cast<size_t>(k)];
    for (size_t i = 0; i < mine.size(); ++i) {
      std::this_thread::sleep_until(mine[i]);
      const size_t n = i * static_cast<size_t>(senders) + static_cast<size_t>(k);  // rotation over all senders
      auto call = std::make_unique<Call>();
      call->scheduled = mine[i];
      call->context.set_deadline(std::chrono::system_clock::now() + Seconds(o.timeout_seconds) -
                                 (Clock::now() - mine[i]));
      call->reader =
          stubs[n % stubs.size()]->PrepareUnaryCall(&call->context, kModelInfer, requests[n % requests.size()], &queue);
      call->reader->StartCall();
      Call* raw = call.release();  // the collector owns it from here
      raw->reader->Finish(&raw->response, &raw->status, raw);
    }
  };
  std::vector<std::thread> sending;
  for (int k = 0; k < senders; ++k) sending.emplace_back(send, k);
  for (std::thread& t : sending) t.join();
  collector.join();
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
  return recorder.Summarise(o.rate);
}

}  // namespace rankd
