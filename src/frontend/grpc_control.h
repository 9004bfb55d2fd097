// GrpcControl: the KServe and Triton gRPC calls answered at once, each from its request message
// into its response (health, metadata, model configuration, statistics, the repository, shared
// memory, log and trace settings; docs/serving.md). GrpcServer (frontend/grpc_server.h) takes the
// calls, checks their restrictions and answers with what these return; ModelInfer is its own.
#pragma once

#include <grpcpp/support/status.h>

#include "frontend/health_probes.h"
#include "frontend/shared_memory_regions.h"
#include "grpc_service.pb.h"
#include "rankd/status.h"
#include "serving/infer_service.h"

namespace rankd {

// rankd's status as gRPC's: the same message, the nearest code (INTERNAL for the rest).
grpc::Status ToGrpc(const Status& s);

class GrpcControl {
 public:
  GrpcControl(InferService& infer, const HealthProbes& probes, SharedMemoryRegions& shared_memory)
      : infer_(infer), probes_(probes), shared_memory_(shared_memory) {}

  grpc::Status ServerLive(const inference::ServerLiveRequest&, inference::ServerLiveResponse& r);
  grpc::Status ServerReady(const inference::ServerReadyRequest&, inference::ServerReadyResponse& r);
  grpc::Status ModelReady(const inference::ModelReadyRequest& q, inference::ModelReadyResponse& r);
  grpc::Status ServerMetadata(const inference::ServerMetadataRequest&, inference::ServerMetadataResponse& r);
  grpc::Status ModelStatistics(const inference::ModelStatisticsRequest& q, inference::ModelStatisticsResponse& r);
  grpc::Status ModelConfig(const inference::ModelConfigRequest& q, inference::ModelConfigResponse& r);
  grpc::Status ModelMetadata(const inference::ModelMetadataRequest& q, inference::ModelMetadataResponse& r);
  grpc::Status SystemSharedMemoryStatus(const inference::SystemSharedMemoryStatusRequest& q,
                                        inference::SystemSharedMemoryStatusResponse& r);
  grpc::Status SystemSharedMemoryRegister(const inference::SystemSharedMemoryRegisterRequest& q,
                                          inference::SystemSharedMemoryRegisterResponse&);
  grpc::Status SystemSharedMemoryUnregister(const inference::SystemSharedMemoryUnregisterRequest& q,
                                            inference::SystemSharedMemoryUnregisterResponse&);
  grpc::Status CudaSharedMemoryStatus(const inference::CudaSharedMemoryStatusRequest& q,
                                      inference::CudaSharedMemoryStatusResponse& r);
  grpc::Status CudaSharedMemoryRegister(const inference::CudaSharedMemoryRegisterRequest& q,
                                        inference::CudaSharedMemoryRegisterResponse&);
  grpc::Status CudaSharedMemoryUnregister(const inference::CudaSharedMemoryUnregisterRequest& q,
                                          inference::CudaSharedMemoryUnregisterResponse&);
  grpc::Status TraceSetting(const inference::TraceSettingRequest& q, inference::TraceSettingResponse& r);
  grpc::Status LogSettings(const inference::LogSettingsRequest& q, inference::LogSettingsResponse& r);
  grpc::Status RepositoryIndex(const inference::RepositoryIndexRequest& q, inference::RepositoryIndexResponse& r);
  grpc::Status RepositoryModelLoad(const inference::RepositoryModelLoadRequest& q,
                                   inference::RepositoryModelLoadResponse&);
  grpc::Status RepositoryModelUnload(const inference::RepositoryModelUnloadRequest& q,
                                     inference::RepositoryModelUnloadResponse&);

 private:
  InferService& infer_;
  const HealthProbes& probes_;
  SharedMemoryRegions& shared_memory_;
};

}  // namespace rankd
