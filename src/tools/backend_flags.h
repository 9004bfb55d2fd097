// What --backend, --device, --cuda KEY=VALUE (repeatable) and --profile give every command that loads a
// model: the settings applied to the process, then the backend found.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "backend/backend.h"

namespace rankd {

struct BackendFlags {
  explicit BackendFlags(std::string default_backend) : backend(std::move(default_backend)) {}
  std::string backend;
  int device = 0;
  std::vector<std::string> cuda;  // runtime/cuda_options.h's keys
  std::string profile = "off";    // off | ops | steps | host (runtime/op_profile.h)
};

// Adds --backend (with `backend_help`), --device, --cuda and --profile to `command`.
void AddBackendFlags(CLI::App* command, BackendFlags& flags, const std::string& backend_help);

// Applies --cuda and --profile, then finds --backend on --device.
StatusOr<const Backend*> OpenBackend(const BackendFlags& flags);

}  // namespace rankd
