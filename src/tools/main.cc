// rankd: the command-line entry point.
#include <CLI/CLI.hpp>

#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"rankd: an inference server for ranking and recommendation models"};
  app.require_subcommand(1);

  rankd::RunArgs run;
  CLI::App* run_cmd = app.add_subcommand("run", "Score KServe v2 JSON requests (one per line) offline");
  run_cmd->add_option("--model-repo,--model-repository", run.model_repo, "Model repository directory")->required();
  run_cmd->add_option("--model", run.model, "Model name")->required();
  run_cmd->add_option("--model-version", run.version, "Version to load (default: latest)");
  run_cmd->add_option("--input", run.input, "File of request bodies, one per line ('-' for stdin)");

  rankd::InspectArgs inspect;
  CLI::App* inspect_cmd = app.add_subcommand("inspect", "Print a model's signature, ops and tables");
  inspect_cmd->add_option("--model-repo,--model-repository", inspect.model_repo, "Model repository directory")->required();
  inspect_cmd->add_option("--model", inspect.model, "Model name")->required();
  inspect_cmd->add_option("--model-version", inspect.version, "Version (default: latest)");

  CLI11_PARSE(app, argc, argv);
  if (run_cmd->parsed()) return rankd::RunCommand(run);
  if (inspect_cmd->parsed()) return rankd::InspectCommand(inspect);
  return 2;
}
