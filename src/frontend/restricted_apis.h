// RestrictedApis: Triton's restricted APIs (`--http-restricted-api` and
// `--grpc-restricted-protocol`): each category of calls may require a header (HTTP) or metadata
// entry (gRPC) of a given value, so that, say, model loading answers only to a caller holding an
// admin key. A call of a restricted category without it is refused (HTTP 403, gRPC UNAVAILABLE,
// "This API is restricted, expecting header 'KEY'"), before anything else is read.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "rankd/status.h"

namespace rankd {

enum class ApiCategory {
  kHealth,
  kMetadata,
  kInference,
  kSharedMemory,
  kModelConfig,
  kModelRepository,
  kStatistics,
  kTrace,
  kLogging,
};

class RestrictedApis {
 public:
  // Adds a restriction "CATEGORY[,CATEGORY...]:KEY=VALUE" (categories: health, metadata,
  // inference, shared-memory, model-config, model-repository, statistics, trace, logging). Errors:
  // an unknown category, one restricted twice, no KEY=VALUE. Keys are compared without case (HTTP
  // headers and gRPC metadata keys are case-insensitive), values exactly.
  Status Add(std::string_view spec);
  // OK for a call of `category` whose headers (`header(key)`: the value, or nullopt) carry what
  // its restriction asks; otherwise the refusal's message.
  std::optional<std::string> Refusal(ApiCategory category,
                                     const std::function<std::optional<std::string>(const std::string&)>& header) const;

 private:
  struct Rule {
    std::string key, value;  // key lowercased; empty: unrestricted
  };
  std::array<Rule, 9> rules_;
};

}  // namespace rankd
