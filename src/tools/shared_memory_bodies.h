// `rankd bench server --shared-memory system`: the requests' tensors in one POSIX shared memory
// region the server maps (Triton's system shared-memory extension), as a co-located caller sends
// them. Each request of the file has its inputs and its outputs at their own offsets in the
// region: its body (a gRPC ModelInferRequest, or an HTTP JSON body) names the region, offset and
// size of every input and output instead of carrying bytes, and the server writes the scores into
// the region. The region is registered, and the outputs' sizes read from the model's metadata,
// over the protocol the load uses. Requests are sent in rotation, so two calls in flight write the
// same outputs only when more calls than the file has lines are in flight at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "grpc_service.pb.h"
#include "rankd/request.h"
#include "rankd/status.h"
#include "tools/load_generator.h"

namespace rankd {

// `r` as a KServe v2 gRPC ModelInferRequest without its tensors' bytes: the id, and each input's
// name, datatype, shape and, for a ragged one sent flat, its "lengths" parameter (docs/serving.md).
// The caller adds the bytes: raw contents, or a shared memory region.
inference::ModelInferRequest GrpcRequestHeader(const InferRequest& r, const std::string& model,
                                               const std::string& version);

class SharedMemoryBodies {
 public:
  // Where the requests go: "grpc" or "http" at host:port, to model and version.
  struct Server {
    std::string protocol, host;
    int port = 0;
    std::string model, version;
  };

  // Creates the region (`/rankd_bench_PID`), writes every request's inputs into it, registers it
  // with the server (as region "rankd_bench"), and builds the requests.
  static StatusOr<std::unique_ptr<SharedMemoryBodies>> Create(const Server& server,
                                                              const std::vector<InferRequest>& requests);
  // Unregisters the region from the server and removes it.
  ~SharedMemoryBodies();

  const std::vector<LoadOptions::Body>& bodies() const { return bodies_; }

 private:
  SharedMemoryBodies() = default;
  Server server_;
  std::string key_, name_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  bool registered_ = false;
  std::vector<LoadOptions::Body> bodies_;
};

}  // namespace rankd
