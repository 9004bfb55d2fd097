// The `rankd` subcommands. Each returns the process exit code.
#pragma once

#include <cstdint>
#include <string>

namespace rankd {

struct RunArgs {
  std::string model_repo;
  std::string model;
  int64_t version = -1;
  std::string input = "-";  // a file of KServe v2 JSON bodies, one per line; "-" = stdin
};
// Offline scoring: one response line on stdout per request line; errors on stderr. Exit 0 when
// every line scored, 1 when some failed, 2 when the model did not load.
int RunCommand(const RunArgs& args);

struct InspectArgs {
  std::string model_repo;
  std::string model;
  int64_t version = -1;
};
int InspectCommand(const InspectArgs& args);

}  // namespace rankd
