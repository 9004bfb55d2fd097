// The zoo's MMoE, loaded once from the repository root (where scripts/fuzz.sh runs the fuzzers);
// nullptr elsewhere.
#pragma once

#include <memory>

#include "serving/model.h"

inline const rankd::Model* ZooModel() {
  static const std::unique_ptr<rankd::Model> model = [] {
    auto m = rankd::Model::Load("models/zoo/mmoe", -1);
    return m.ok() ? std::move(*m) : nullptr;
  }();
  return model.get();
}
