#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "frontend/kserve_json.h"
#include "serving/model.h"
#include "tools/commands.h"

namespace rankd {

int RunCommand(const RunArgs& args) {
  std::string dir = (std::filesystem::path(args.model_repo) / args.model).string();
  auto backend = OpenBackend(args.device);
  if (!backend.ok()) {
    std::cerr << "rankd run: " << backend.status().ToString() << "\n";
    return 2;
  }
  ModelOptions options;
  options.backend = *backend;
  options.gpus = GpusFlag(args.device);
  auto model = Model::Load(dir, args.version, options);
  if (!model.ok()) {
    std::cerr << "rankd run: " << model.status().ToString() << "\n";
    return 2;
  }
  std::ifstream file;
  if (args.input != "-") {
    file.open(args.input);
    if (!file) {
      std::cerr << "rankd run: cannot open input '" << args.input << "'\n";
      return 2;
    }
  }
  std::istream& in = args.input == "-" ? std::cin : file;
  std::string line;
  int64_t line_no = 0, failed = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto request = ParseInferRequestJson(line);
    Status status = request.status();
    if (status.ok()) {
      auto outputs = (*model)->Infer(*request);
      if (outputs.ok()) {
        std::cout << InferResponseJson((*model)->name(), (*model)->version(), request->id, *outputs) << "\n";
        continue;
      }
      status = outputs.status();
    }
    ++failed;
    std::cerr << "line " << line_no << ": " << status.ToString() << "\n";
    std::cout << ErrorJson(status.message()) << "\n";
  }
  std::cout.flush();
  return failed ? 1 : 0;
}

}  // namespace rankd
