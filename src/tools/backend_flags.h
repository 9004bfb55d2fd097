// What --backend, --device, --gpus, --cuda KEY=VALUE (repeatable) and --profile give every command that loads a
// model: the settings applied to the process, then the backend found.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"

namespace CLI {
class App;  // CLI11's, declared only: its header takes seconds to compile (main.cc and backend_flags.cc include it)
}  // namespace CLI

namespace rankd {

struct BackendFlags {
  explicit BackendFlags(std::string default_backend) : backend(std::move(default_backend)) {}
  std::string backend;
  int device = 0;
  std::string gpus;               // "all" or "0,1": the GPUs models are replicated on unless their config names some
  std::vector<std::string> cuda;  // runtime/cuda_options.h's keys
  std::string profile = "off";    // off | ops | steps | host (runtime/op_profile.h)
};

// Adds --backend (with `backend_help`), --device, --gpus, --cuda and --profile to `command`.
void AddBackendFlags(CLI::App* command, BackendFlags& flags, const std::string& backend_help);

// Applies --cuda and --profile, then finds --backend on --device (and checks --gpus).
StatusOr<const Backend*> OpenBackend(const BackendFlags& flags);
// --gpus, parsed (empty when it is not given or does not parse: OpenBackend refuses the latter).
GpuSet GpusFlag(const BackendFlags& flags);

}  // namespace rankd
