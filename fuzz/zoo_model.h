// The zoo's MMoE, W4s (MMoE with six categorical features sent as strings), DIN, and DIN with its
// behaviour sequences sent as delimited strings ("12,7,40", docs/strings.md: DIN's graph under a
// config that splits them, written into a temporary folder), loaded once from the repository root
// (where scripts/fuzz.sh runs the fuzzers); empty elsewhere. A fuzzed request is scored by all of
// them: each refuses the others' inputs, and takes its own.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "serving/model.h"

// A folder removed when the process ends.
struct FuzzTempDir {
  std::string path;
  ~FuzzTempDir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
};

// DIN with its sequences split from strings, in `dir`; empty where din's config is not as expected.
inline std::string DinWithSplitSequences(const std::string& dir) {
  std::ifstream in("models/zoo/din/config.yaml");
  std::stringstream read;
  read << in.rdbuf();
  std::string config = read.str();
  for (const std::string seq : {"seq_items", "seq_cats"}) {
    const std::string from = "  - name: " + seq + "\n    datatype: INT64\n";
    const size_t at = config.find(from);
    if (at == std::string::npos) return "";
    config.replace(at, from.size(), "  - name: " + seq + "\n    datatype: BYTES\n    split: \",\"\n");
  }
  const std::string model = dir + "/din_split";
  std::error_code failed;
  std::filesystem::create_directories(model, failed);
  std::filesystem::create_directory_symlink(std::filesystem::absolute("models/zoo/din/1"), model + "/1", failed);
  if (failed) return "";
  std::ofstream(model + "/config.yaml") << config;
  return model;
}

inline const std::vector<std::unique_ptr<rankd::Model>>& ZooModels() {
  static FuzzTempDir temp;
  static const std::vector<std::unique_ptr<rankd::Model>> models = [] {
    std::vector<std::unique_ptr<rankd::Model>> loaded;
    std::string dir = (std::filesystem::temp_directory_path() / "rankd-fuzz-XXXXXX").string();
    if (!mkdtemp(dir.data())) return loaded;
    temp.path = dir;
    const std::string split = DinWithSplitSequences(dir);
    if (split.empty()) return loaded;
    for (const std::string& name : {std::string("models/zoo/mmoe"), std::string("models/zoo/mmoe_strings"),
                                    std::string("models/zoo/din"), split}) {
      auto m = rankd::Model::Load(name, -1);
      if (!m.ok()) return std::vector<std::unique_ptr<rankd::Model>>();
      loaded.push_back(std::move(*m));
    }
    return loaded;
  }();
  return models;
}
