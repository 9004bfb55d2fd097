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
  rankd::AddBackendFlags(run_cmd, run.device, "cpu | cuda | auto (cuda when a GPU is present)");

  rankd::InspectArgs inspect;
  CLI::App* inspect_cmd = app.add_subcommand("inspect", "Print a model's signature, ops and tables");
  inspect_cmd->add_option("--model-repo,--model-repository", inspect.model_repo, "Model repository directory")
      ->required();
  inspect_cmd->add_option("--model", inspect.model, "Model name")->required();
  inspect_cmd->add_option("--model-version", inspect.version, "Version (default: latest)");
  rankd::AddBackendFlags(inspect_cmd, inspect.device, "cpu | cuda | auto: load the model there");
  inspect_cmd->add_flag("--plan", inspect.plan, "Show the plan of each shape bucket: steps and kernels");
  inspect_cmd->add_flag("--nodes", inspect.nodes, "List the graph after the passes, node by node");
  inspect_cmd->add_flag("!--no-fusion", inspect.fusion, "Load without the fusion passes (to compare)");
  inspect_cmd->add_flag("!--no-hoisting", inspect.hoisting, "Load without user-side hoisting (to compare)");
  inspect_cmd
      ->add_option("--table-dtype", inspect.table_dtype,
                   "FP32 | BF16 | FP16: how bag tables are stored (default: the config's)")
      ->check(CLI::IsMember({"FP32", "BF16", "FP16"}));
  inspect_cmd->add_option("--requests", inspect.requests,
                          "KServe JSON bodies, one per line: estimate the hit ratio of a GPU cache of the tables");
  inspect_cmd->add_option("--cache-mb", inspect.cache_mb, "GPU memory sizes for --requests' estimate (MB)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  inspect_cmd
      ->add_option("--table-gpu-budget-mb", inspect.table_gpu_budget_mb,
                   "GPU memory for embedding tables; the rest stay in host memory (default: the config's)")
      ->check(CLI::NonNegativeNumber);
  inspect_cmd
      ->add_option("--table-host-budget-mb", inspect.table_host_budget_mb,
                   "host memory for the tables not on the GPU; past it tables go on disk (default: the config's)")
      ->check(CLI::NonNegativeNumber);
  inspect_cmd
      ->add_option("--table-cache-percent", inspect.table_cache_percent,
                   "cache every lookup table on the GPU with this percentage of its rows (at least one row)")
      ->check(CLI::Range(0.0, 100.0));

  rankd::ServeArgs serve;
  CLI::App* serve_cmd = app.add_subcommand("serve", "Serve models over KServe v2 (HTTP) with Prometheus metrics");
  serve_cmd->add_option("--model-repository,--model-repo", serve.model_repository, "Model repository directory")
      ->required();
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
  serve_cmd->add_option("--max-body-mb", serve.max_body_mb, "Largest request body accepted")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--max-inflight", serve.max_inflight, "Requests handled at once; more are refused with 503")
      ->check(CLI::PositiveNumber);
  serve_cmd
      ->add_option("--shared-memory-pin-limit-mb", serve.shared_memory_pin_limit_mb,
                   "On GPUs: system shared memory regions are page-locked as they are registered, so that a GPU "
                   "reads their inputs in place, this much at most (a region past it is refused; 0: none locked)")
      ->check(CLI::NonNegativeNumber);
  rankd::AddBackendFlags(serve_cmd, serve.device, "cpu | cuda | auto (cuda when a GPU is present)");
  serve_cmd
      ->add_option("--http-threads", serve.http_threads,
                   "HTTP worker threads (0: twice the cores it may run on, at least 8)")
      ->check(CLI::NonNegativeNumber);
  serve_cmd
      ->add_option("--http-io-threads", serve.http_io_threads,
                   "HTTP I/O threads, which read requests off their sockets and write the answers (0: half the "
                   "cores it may run on, at least 2)")
      ->check(CLI::NonNegativeNumber);
  serve_cmd
      ->add_option("--grpc-threads", serve.grpc_threads,
                   "gRPC completion-queue threads (0: one per core it may run on, at least 2, for each GPU models are "
                   "replicated on by default)")
      ->check(CLI::NonNegativeNumber);
  serve_cmd
      ->add_option("--grpc-max-queue-ms", serve.grpc_max_queue_ms,
                   "A gRPC inference call that waits longer to be handled, or finds --max-inflight calls waiting, "
                   "is refused unread with UNAVAILABLE")
      ->check(CLI::PositiveNumber);
  serve_cmd
      ->add_option("--http-max-queue-ms", serve.http_max_queue_ms,
                   "An HTTP inference request that waits longer for a worker to take it is refused unread with 503")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--grpc-channel-arg", serve.grpc_channel_args,
                        "NAME=INTEGER: a gRPC core channel argument for the server (e.g. grpc.http2.max_frame_size="
                        "1048576; docs/serving.md); repeatable");
  serve_cmd
      ->add_option("--http-max-connections", serve.http_max_connections,
                   "Open HTTP connections at most; more are answered 503 and closed")
      ->check(CLI::PositiveNumber);
  serve_cmd
      ->add_option(
          "--http-header-timeout-secs", serve.http_header_timeout_secs,
          "Seconds a connection may take to send a request's header (an idle keep-alive connection closes then)")
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--strict-readiness", serve.strict_readiness,
                        "true: /v2/health/ready needs every model that should load to be ready; false: live is ready");
  serve_cmd->add_option("--http-restricted-api", serve.http_restricted,
                        "CATEGORY[,CATEGORY...]:KEY=VALUE: HTTP calls of those categories need header KEY=VALUE "
                        "(health, metadata, inference, shared-memory, model-config, model-repository, statistics, "
                        "trace, logging); repeatable");
  serve_cmd->add_option("--grpc-restricted-protocol", serve.grpc_restricted,
                        "The same for gRPC calls and their metadata; repeatable");
  serve_cmd->add_option("--http-use-ssl", serve.http_ssl, "true: HTTPS on the HTTP port (--http-server-cert, -key)");
  serve_cmd->add_option("--http-server-cert", serve.http_server_cert, "PEM certificate chain of the HTTPS server");
  serve_cmd->add_option("--http-server-key", serve.http_server_key, "PEM private key of the HTTPS server");
  serve_cmd->add_option("--grpc-use-ssl", serve.grpc_ssl, "true: TLS on the gRPC port (--grpc-server-cert, -key)");
  serve_cmd->add_option("--grpc-use-ssl-mutual", serve.grpc_ssl_mutual,
                        "true: TLS with client certificates signed by --grpc-root-cert");
  serve_cmd->add_option("--grpc-server-cert", serve.grpc_server_cert, "PEM certificate chain of the gRPC server");
  serve_cmd->add_option("--grpc-server-key", serve.grpc_server_key, "PEM private key of the gRPC server");
  serve_cmd->add_option("--grpc-root-cert", serve.grpc_root_cert, "PEM root certificates client certificates chain to");
  serve_cmd->add_option("--trace-config", serve.trace_config,
                        "[triton,]SETTING=VALUE: a trace setting at start (level, rate, count, file, log-frequency); "
                        "repeatable");
  serve_cmd->add_option("--log-file", serve.log.file, "Write the log to this file (default: stderr)");
  serve_cmd->add_option("--log-info", serve.log.info, "true | false: info messages");
  serve_cmd->add_option("--log-warning", serve.log.warning, "true | false: warnings");
  serve_cmd->add_option("--log-error", serve.log.error, "true | false: errors");
  serve_cmd->add_option("--log-verbose", serve.log.verbose_level, "Verbose messages up to this level (0: none)")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--log-format", serve.log.format, "default | ISO8601")
      ->check(CLI::IsMember({"default", "ISO8601"}));
  serve_cmd->add_option("--log-access", serve.log.access,
                        "true | false: a line per HTTP request and gRPC call (peer, method, status, bytes, time)");
  serve_cmd->add_option("--executors", serve.executors, "Executors per model (0: the backend's default)")
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--max-rows", serve.max_rows, "Rows per request when a model's config sets no max_batch_size")
      ->check(CLI::PositiveNumber);

  auto* bench_cmd = app.add_subcommand("bench", "Benchmarks");
  rankd::BenchEngineArgs engine;
  auto* bench_engine = bench_cmd->add_subcommand("engine", "In-process latency of a model on one request shape");
  bench_engine->add_option("--model-repo,--model-repository", engine.model_repo, "Model repository directory")
      ->required();
  bench_engine->add_option("--model", engine.model, "Model name")->required();
  bench_engine->add_option("--model-version", engine.version, "Version (default: latest)");
  bench_engine
      ->add_option("--requests", engine.requests, "File of KServe JSON bodies of one size, one per line (rotated)")
      ->required();
  rankd::AddBackendFlags(bench_engine, engine.device, "cpu | cuda | auto");
  bench_engine
      ->add_option("--table-dtype", engine.table_dtype,
                   "FP32 | BF16 | FP16: how bag tables are stored (default: the config's)")
      ->check(CLI::IsMember({"FP32", "BF16", "FP16"}));
  bench_engine
      ->add_option("--table-gpu-budget-mb", engine.table_gpu_budget_mb,
                   "GPU memory for embedding tables; the rest stay in host memory (default: the config's)")
      ->check(CLI::NonNegativeNumber);
  bench_engine
      ->add_option("--table-cache-percent", engine.table_cache_percent,
                   "cache every lookup table on the GPU with this percentage of its rows (at least one row)")
      ->check(CLI::Range(0.0, 100.0));
  bench_engine->add_option("--tables-on-disk", engine.tables_on_disk,
                           "put every lookup table that may go on disk there (tables.tiers: disk), writing those "
                           "held in memory into this folder");
  bench_engine->add_option("--hotness-snapshot", engine.hotness_snapshot,
                           "where the table caches' rows are saved and the next run starts warm from (default: the "
                           "config's tables.hotness_snapshot; tables on disk use FILE.disk)");
  bench_engine
      ->add_option("--table-disk-cache-mb", engine.table_disk_cache_mb,
                   "host memory for the rows of tables on disk (default: the config's tables.disk_cache_mb)")
      ->check(CLI::NonNegativeNumber);
  bench_engine
      ->add_option("--table-host-budget-mb", engine.table_host_budget_mb,
                   "host memory for the tables not on the GPU; past it tables go on disk (default: the config's)")
      ->check(CLI::NonNegativeNumber);
  bench_engine
      ->add_option("--fresh-ids", engine.fresh_ids,
                   "time N variants of each request whose lookups' ids are drawn anew (Zipf 1.05 over each "
                   "table's rows, rankd_zoo's hot rows), and warm caches on a new variant every run: traffic the "
                   "caches have not seen, not the file's replayed")
      ->check(CLI::Range(0, 100000));
  bench_engine
      ->add_option("--fresh-ids-seed", engine.fresh_ids_seed,
                   "the seed of --fresh-ids' draws, the timed runs' and the cache warm-up's (default 1): "
                   "runs that must not meet each other's rows, such as a restart, take different ones")
      ->check(CLI::Range(uint64_t{1}, uint64_t{255}));
  bench_engine
      ->add_option("--cache-warmup-s", engine.cache_warmup_s,
                   "with table caches (on the GPU, or the host caches of tables on disk): score the requests this "
                   "many seconds more before timing, so that the caches reach their steady state")
      ->check(CLI::NonNegativeNumber);
  bench_engine
      ->add_option("--precision", engine.precision,
                   "fp32 | tf32 | bf16 | bf16-activations (default: the model config's)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "bf16-activations"}));
  bench_engine->add_option("--buckets", engine.buckets, "on | off | config: shape buckets (and, on a GPU, CUDA graphs)")
      ->check(CLI::IsMember({"on", "off", "config"}));
  bench_engine
      ->add_option("--cpu-row-split", engine.cpu_row_split,
                   "auto | on | off | config: on the CPU, split a run's rows over the threads (docs/engine.md)")
      ->check(CLI::IsMember({"auto", "on", "off", "config"}));
  bench_engine->add_flag("!--no-fusion", engine.fusion, "Without the fusion passes (to measure what they save)");
  bench_engine->add_flag("!--no-hoisting", engine.hoisting, "Without user-side hoisting (to measure what it saves)");
  bench_engine->add_option("--warmup", engine.warmup, "Untimed runs first (at least one per request)")
      ->check(CLI::NonNegativeNumber);
  bench_engine->add_option("--iters", engine.iters, "Timed runs")->check(CLI::Range(1, 100000000));
  bench_engine
      ->add_option("--in-flight", engine.in_flight, "Requests scored at a time, each by its own thread (throughput)")
      ->check(CLI::Range(1, 64));
  bench_engine->add_option("--executors", engine.executors, "Executors of the model (0: the backend's default)")
      ->check(CLI::Range(0, 64));
  bench_engine->add_option("--label", engine.label, "A name carried into the output");
  bench_engine->add_option("--json", engine.json_path, "Also write the result here");
  bench_engine->add_option("--csv", engine.csv_path, "Also append the result to this CSV file (a header when new)");

  rankd::BenchServerArgs bench;
  auto* bench_server =
      bench_cmd->add_subcommand("server", "Open-loop (Poisson) HTTP or gRPC load against a running server");
  bench_server->add_option("--protocol", bench.protocol, "http | grpc (KServe v2 over either)")
      ->check(CLI::IsMember({"http", "grpc"}));
  bench_server->add_option("--host", bench.host, "Server address");
  bench_server->add_option("--port", bench.port, "Server port (HTTP, or gRPC with --protocol grpc)");
  bench_server->add_option("--model", bench.model, "Model name")->required();
  bench_server->add_option("--model-version", bench.version, "Model version (default: the server's choice)");
  bench_server->add_option("--requests", bench.requests, "File of KServe JSON bodies, one per line")->required();
  bench_server->add_option("--rates", bench.rates, "Offered rates in requests/s (a sweep when several)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  bench_server->add_option("--seconds", bench.seconds, "Measured seconds per rate")->check(CLI::PositiveNumber);
  bench_server->add_option("--warmup", bench.warmup_seconds, "Seconds of load before measuring")
      ->check(CLI::NonNegativeNumber);
  bench_server->add_option("--connections", bench.connections, "Keep-alive connections (HTTP) or channels (gRPC)")
      ->check(CLI::PositiveNumber);
  bench_server
      ->add_option("--client-threads", bench.client_threads,
                   "Client threads sending, each with its share of the rate (HTTP: and of the connections)")
      ->check(CLI::PositiveNumber);
  bench_server->add_option("--timeout", bench.timeout_seconds, "Seconds before a request counts as timed out")
      ->check(CLI::PositiveNumber);
  bench_server->add_option("--p99-target-ms", bench.p99_target_ms,
                           "Report the highest rate whose p99 stays under this");
  bench_server->add_flag("--binary", bench.binary,
                         "Send tensors in KServe's binary extension and ask for the outputs in it (as tritonclient "
                         "does), not JSON numbers");
  bench_server->add_flag("--typed", bench.typed,
                         "With --protocol grpc, send tensors as typed contents (int64_contents, bytes_contents, "
                         "...), not raw_input_contents");
  bench_server
      ->add_option("--shared-memory", bench.shared_memory,
                   "system: inputs and outputs in a POSIX shared memory region the server maps (the body names "
                   "their places; registered over --protocol)")
      ->check(CLI::IsMember({"system"}));
  bench_server
      ->add_option("--lengths", bench.lengths,
                   "With --binary or gRPC, send a ragged input's lengths as a tensor NAME.lengths (INT32, what stock "
                   "clients can send) or as its \"lengths\" parameter")
      ->check(CLI::IsMember({"tensor", "parameter"}));
  bench_server->add_option("--json", bench.json_path, "Write the JSON results here (default: stdout)");
  bench_server->add_option("--csv", bench.csv_path, "Also write a CSV table here");

  rankd::BenchLoadArgs load;
  auto* bench_load = bench_cmd->add_subcommand(
      "load", "Open-loop (Poisson) load in-process through the batcher: the server scenario without the network");
  bench_load->add_option("--model-repo,--model-repository", load.model_repo, "Model repository directory")->required();
  bench_load->add_option("--model", load.model, "Model name")->required();
  bench_load->add_option("--model-version", load.version, "Version (default: latest)");
  bench_load->add_option("--requests", load.requests, "File of KServe JSON bodies, one per line (the mix)")->required();
  rankd::AddBackendFlags(bench_load, load.device, "cpu | cuda | auto");
  bench_load
      ->add_option("--precision", load.precision, "fp32 | tf32 | bf16 | bf16-activations (default: the model config's)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "bf16-activations"}));
  bench_load->add_option("--batching", load.batching, "on | off | config")
      ->check(CLI::IsMember({"on", "off", "config"}));
  bench_load->add_option("--executors", load.executors, "Executors of the model (0: the backend's default)")
      ->check(CLI::Range(0, 64));
  bench_load->add_option("--rates", load.rates, "Offered rates in requests/s (a sweep when several)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  bench_load->add_option("--seconds", load.seconds, "Measured seconds per rate")->check(CLI::PositiveNumber);
  bench_load->add_option("--warmup", load.warmup_seconds, "Seconds of load before measuring")
      ->check(CLI::NonNegativeNumber);
  bench_load->add_option("--clients", load.clients, "Threads handing arrivals to the model")
      ->check(CLI::Range(1, 4096));
  bench_load->add_option("--timeout", load.timeout_seconds, "Seconds to wait for a rate's last answers")
      ->check(CLI::PositiveNumber);
  bench_load->add_option("--p99-target-ms", load.p99_target_ms, "Report the highest rate whose p99 stays under this");
  bench_load->add_option("--json", load.json_path, "Write the JSON results here (default: stdout)");

  rankd::BenchCacheArgs cache;
  auto* bench_cache = bench_cmd->add_subcommand(
      "cache", "The GPU cache's policy on a Zipf trace against Belady's optimum and the static oracle");
  bench_cache->add_option("--rows", cache.rows, "Rows of the table")->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  bench_cache->add_option("--zipf", cache.zipf, "Zipf exponent of the accesses")->check(CLI::Range(0.01, 10.0));
  bench_cache->add_option("--accesses", cache.accesses, "Accesses in the trace")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 32));
  bench_cache->add_option("--drift-every", cache.drift_every, "Accesses between moves of the hot set (0: never)")
      ->check(CLI::NonNegativeNumber);
  bench_cache->add_option("--drift-rows", cache.drift_rows, "Ranks the hot set moves by each time")
      ->check(CLI::NonNegativeNumber);
  bench_cache->add_option("--capacity", cache.capacities, "Cache sizes in rows (a sweep when several)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  bench_cache->add_option("--victim-sample", cache.victim_sample, "Cached keys sampled for a victim (default 8)")
      ->check(CLI::Range(1, 32));
  bench_cache
      ->add_option("--halve-every", cache.halve_every,
                   "Accesses a slot between halvings of the frequency sketch (default 30)")
      ->check(CLI::PositiveNumber);
  bench_cache->add_option("--seed", cache.seed, "Seed of the trace and the policy's sampler");
  bench_cache->add_option("--snapshot", cache.snapshot_path, "Write and read back the halfway hotness snapshot here");
  bench_cache->add_option("--json", cache.json_path, "Also write the results here");
  rankd::BenchDiskArgs disk;
  auto* bench_disk = bench_cmd->add_subcommand(
      "disk", "A table's rows read from a file in batches (io_uring, O_DIRECT) against the disk's own ceiling");
  bench_disk->add_option("--file", disk.file, "The rows' file")->required();
  bench_disk->add_option("--create-mb", disk.create_mb, "First write this many MiB of random bytes to the file")
      ->check(CLI::NonNegativeNumber);
  bench_disk->add_option("--row-bytes", disk.row_bytes, "Bytes of a row")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  bench_disk->add_option("--batch", disk.batch, "Rows per batch")->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  bench_disk->add_option("--zipf", disk.zipf, "Zipf exponent of the ids (0: uniform)")->check(CLI::Range(0.0, 10.0));
  bench_disk->add_option("--cache-rows", disk.cache_rows, "A host cache of this many rows in front of the file")
      ->check(CLI::NonNegativeNumber);
  bench_disk->add_option("--queue-depth", disk.queue_depth, "Reads in flight")->check(CLI::Range(1, 4096));
  bench_disk->add_option("--seconds", disk.seconds, "Seconds of rows (the ceiling runs half as long)")
      ->check(CLI::PositiveNumber);
  bench_disk->add_option("--seed", disk.seed, "Seed of the ids");
  bench_disk->add_option("--json", disk.json_path, "Also write the results here");
  bench_cmd->require_subcommand(1);

  CLI11_PARSE(app, argc, argv);
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += std::string(i ? " " : "") + argv[i];
  if (bench_engine->parsed()) {
    engine.command_line = command_line;
    return rankd::BenchEngineCommand(engine);
  }
  if (bench_server->parsed()) {
    bench.command_line = command_line;
    return rankd::BenchServerCommand(bench);
  }
  if (bench_cache->parsed()) {
    cache.command_line = command_line;
    return rankd::BenchCacheCommand(cache);
  }
  if (bench_disk->parsed()) {
    disk.command_line = command_line;
    return rankd::BenchDiskCommand(disk);
  }
  if (bench_load->parsed()) {
    load.command_line = command_line;
    return rankd::BenchLoadCommand(load);
  }
  if (serve_cmd->parsed()) return rankd::ServeCommand(serve);
  if (run_cmd->parsed()) return rankd::RunCommand(run);
  if (inspect_cmd->parsed()) return rankd::InspectCommand(inspect);
  return 2;
}
