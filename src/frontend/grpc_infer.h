// GrpcInfer: KServe's ModelInfer over gRPC, from the call's message bytes (a raw method: gRPC
// hands over its slices, read in place, infer_request_wire.h) to the serialised answer, through
// InferService. GrpcServer (frontend/grpc_server.h) takes the calls, checks their restrictions,
// and hands each here on the thread HandlesAtOnce chooses.
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "frontend/shared_memory_regions.h"
#include "serving/infer_service.h"

namespace rankd {

class GrpcInfer {
 public:
  using Respond = std::function<void(const grpc::Status&)>;

  // `max_elements`: the most elements an input may declare (GrpcServerOptions::max_elements).
  GrpcInfer(InferService& infer, SharedMemoryRegions& shared_memory, int64_t max_elements)
      : infer_(infer), shared_memory_(shared_memory), max_elements_(max_elements) {}

  // Whether the completion-queue thread that took a call handles it itself instead of queueing it
  // for a worker: a message of at most kAtOnceMessageBytes for a model that batches, which that
  // thread only parses and queues to the batcher (never runs), so that W2's calls cost no
  // worker's wake-up and sleep; past the model's capacity the batcher's own bound refuses them.
  // A name or version that does not resolve is answered there too, at once. Larger messages
  // (W1's), models without batching, and a message whose first slice does not name its model
  // (clients write the name first: PeekNamedModel) go to the workers.
  bool HandlesAtOnce(const grpc::ByteBuffer& bytes) const;
  static constexpr size_t kAtOnceMessageBytes = 64 * 1024;

  // Answers through `respond` once the request has run (on the model's batcher thread when it
  // batches). A client's deadline bounds the request's time in the queue: past it, the request is
  // dropped before it runs (DEADLINE_EXCEEDED, counted as a failure). Runs on a worker of the
  // server's call queue, or where HandlesAtOnce says so on the completion-queue thread, which
  // passes `run_here_when_idle` false (InferService::InferAsync); throws nothing.
  void Infer(grpc::ServerContext& ctx, const grpc::ByteBuffer& bytes, grpc::ByteBuffer& answer, Respond respond,
             bool run_here_when_idle);

 private:
  InferService& infer_;
  SharedMemoryRegions& shared_memory_;
  const int64_t max_elements_;
};

}  // namespace rankd
