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
  run_cmd->add_option("--backend", run.backend, "cpu | cuda | auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));

  rankd::InspectArgs inspect;
  CLI::App* inspect_cmd = app.add_subcommand("inspect", "Print a model's signature, ops and tables");
  inspect_cmd->add_option("--model-repo,--model-repository", inspect.model_repo, "Model repository directory")->required();
  inspect_cmd->add_option("--model", inspect.model, "Model name")->required();
  inspect_cmd->add_option("--model-version", inspect.version, "Version (default: latest)");

  rankd::ServeArgs serve;
  CLI::App* serve_cmd = app.add_subcommand("serve", "Serve models over KServe v2 (HTTP) with Prometheus metrics");
  serve_cmd->add_option("--model-repository,--model-repo", serve.model_repository, "Model repository directory")->required();
  serve_cmd->add_option("--http-address", serve.http_address, "Address to listen on");
  serve_cmd->add_option("--http-port", serve.http_port, "HTTP port (0: any free port)");
  serve_cmd->add_option("--grpc-port", serve.grpc_port, "gRPC port (0: any free port, -1: no gRPC)");
  serve_cmd->add_option("--metrics-port", serve.metrics_port, "Prometheus metrics port");
  serve_cmd->add_option("--model-control-mode", serve.control_mode, "none | poll | explicit")
      ->check(CLI::IsMember({"none", "poll", "explicit"}));
  serve_cmd->add_option("--repository-poll-secs", serve.poll_secs, "Seconds between repository scans (poll mode)")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--load-model", serve.load_models, "Model to load at start (explicit mode); repeatable");
  serve_cmd->add_option("--exit-timeout-secs", serve.exit_timeout_secs, "Longest drain on SIGTERM");
  serve_cmd->add_option("--max-body-mb", serve.max_body_mb, "Largest request body accepted")->check(CLI::PositiveNumber);
  serve_cmd->add_option("--max-inflight", serve.max_inflight, "Requests handled at once; more are refused with 503")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--backend", serve.backend, "cpu | cuda | auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  serve_cmd->add_option("--http-threads", serve.http_threads, "HTTP worker threads (0: twice the cores, at least 8)")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--executors", serve.executors, "Executors per model (0: the backend's default)")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--max-rows", serve.max_rows, "Rows per request when a model's config sets no max_batch_size")
      ->check(CLI::PositiveNumber);

  CLI11_PARSE(app, argc, argv);
  if (serve_cmd->parsed()) return rankd::ServeCommand(serve);
  if (run_cmd->parsed()) return rankd::RunCommand(run);
  if (inspect_cmd->parsed()) return rankd::InspectCommand(inspect);
  return 2;
}
