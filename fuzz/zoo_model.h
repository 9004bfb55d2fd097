// The zoo's MMoE and W4s (MMoE with six categorical features sent as strings), loaded once from the
// repository root (where scripts/fuzz.sh runs the fuzzers); empty elsewhere. A fuzzed request is
// scored by both: each refuses the other's inputs, and takes its own.
#pragma once

#include <memory>
#include <vector>

#include "serving/model.h"

inline const std::vector<std::unique_ptr<rankd::Model>>& ZooModels() {
  static const std::vector<std::unique_ptr<rankd::Model>> models = [] {
    std::vector<std::unique_ptr<rankd::Model>> loaded;
    for (const char* name : {"models/zoo/mmoe", "models/zoo/mmoe_strings"}) {
      auto m = rankd::Model::Load(name, -1);
      if (!m.ok()) return std::vector<std::unique_ptr<rankd::Model>>();
      loaded.push_back(std::move(*m));
    }
    return loaded;
  }();
  return models;
}
