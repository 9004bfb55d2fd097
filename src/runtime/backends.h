// Choosing where a model runs: a backend by name, and an executor for a backend's plans. The
// runtime composes the backends here; nothing below it knows which backends exist.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "runtime/executor.h"

namespace rankd {

// A backend by name and device index: "cpu" (device 0), "cuda" (GPU `device`, by CUDA's
// numbering: CUDA_VISIBLE_DEVICES renumbers), or "auto" (CUDA when it is built in and the device
// is present, else the CPU for device 0). Errors say why a named backend cannot run here.
StatusOr<const Backend*> FindBackend(const std::string& name, int device = 0);

// Where a model's replicas run: on a CUDA `backend`, the GPUs `gpus` names (every one the process
// sees for `all`), or `backend` alone when it names none; on the host, `backend` alone whatever
// `gpus` says (the caller warns). Errors name a GPU that cannot run here.
StatusOr<std::vector<const Backend*>> FindReplicaBackends(const Backend& backend, const GpuSet& gpus);

// OK while one of `backends` (at least one) is healthy (Backend::Health); else the first's health.
// A model's replicas serve while one does; so does a server's liveness over its GPUs.
Status AnyHealthy(const std::vector<const Backend*>& backends);

// A new executor for plans of the model `resources` belongs to (Backend::PrepareModel), on the
// device `backend` runs on: the host executor for host backends, a CUDA executor for CUDA ones.
StatusOr<std::unique_ptr<Executor>> NewExecutor(const Backend& backend, std::shared_ptr<ModelResources> resources);

}  // namespace rankd
