// The `rankd` subcommands. Each returns the process exit code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "tools/backend_flags.h"

namespace rankd {

struct RunArgs {
  std::string model_repo;
  std::string model;
  int64_t version = -1;
  std::string input = "-";      // a file of KServe v2 JSON bodies, one per line; "-" = stdin
  BackendFlags device{"auto"};  // cpu | cuda | auto (cuda when a GPU is present)
};
// Offline scoring: one response line on stdout per request line; errors on stderr. Exit 0 when
// every line scored, 1 when some failed, 2 when the model did not load.
int RunCommand(const RunArgs& args);

struct InspectArgs {
  std::string model_repo;
  std::string model;
  int64_t version = -1;
  BackendFlags device{"cpu"};                   // where the model is loaded (buckets and graphs depend on it)
  bool plan = false;                            // print each warm-up bucket's plan: steps and kernels
  bool nodes = false;                           // print the graph after the passes, node by node
  bool fusion = true;                           // false: load without the fusion passes
  bool hoisting = true;                         // false: load without user-side hoisting
  std::string table_dtype;                      // FP32 | BF16 | FP16; empty: the model config's tables.dtype
  std::optional<int64_t> table_gpu_budget_mb;   // unset: the model config's tables.gpu_budget_mb
  std::optional<double> table_cache_percent;    // set: every lookup table cached with this % of its rows
  std::optional<int64_t> table_host_budget_mb;  // unset: the model config's tables.host_budget_mb
  std::string requests;                         // KServe JSON bodies, one per line: size a cache of the tables on them
  std::vector<double> cache_mb;                 // the cache sizes to try; empty: 1%, 5%, 20% and 50% of the tables
};
int InspectCommand(const InspectArgs& args);

// Triton's flag names and defaults.
struct ServeArgs {
  std::string model_repository;
  std::string http_address = "0.0.0.0";
  int http_port = 8000;
  int grpc_port = 8001;
  int metrics_port = 8002;
  std::string control_mode = "none";  // none | poll | explicit
  int poll_secs = 15;
  std::vector<std::string> load_models;
  int exit_timeout_secs = 30;
  int64_t max_body_mb = 64;
  int max_inflight = 1024;
  int64_t shared_memory_pin_limit_mb = 4096;   // system shared memory page-locked for the GPUs, at most
  int http_threads = 0;                        // 0 = twice the cores, at least 8
  int http_io_threads = 0;                     // 0 = half the cores, at least 2
  int grpc_threads = 0;                        // 0 = one per core, at least 2, per GPU of --gpus
  int grpc_max_queue_ms = 20;                  // a gRPC inference call waiting longer to be handled is refused
  int http_max_queue_ms = 20;                  // an HTTP inference request waiting longer for a worker is refused
  std::vector<std::string> grpc_channel_args;  // "NAME=INTEGER": gRPC core channel arguments
  int http_max_connections = 4096;
  int http_header_timeout_secs = 30;  // a keep-alive connection idle this long closes
  bool strict_readiness = true;       // ready only when every model that should load serves
  int64_t max_rows = 65536;
  BackendFlags device{"auto"};
  int executors = 0;                         // per model; 0 = the backend's default
  std::vector<std::string> http_restricted;  // "CATEGORY[,...]:KEY=VALUE" (frontend/restricted_apis.h)
  std::vector<std::string> grpc_restricted;
  std::vector<std::string> trace_config;  // Triton's --trace-config "[triton,]SETTING=VALUE"
  bool http_ssl = false;                  // HTTPS on the HTTP port (--http-server-cert, --http-server-key)
  std::string http_server_cert, http_server_key;
  bool grpc_ssl = false, grpc_ssl_mutual = false;  // TLS on the gRPC port (frontend/grpc_server.h)
  LogSettings log;                                 // --log-file, --log-info, ... (common/log.h)
  std::string grpc_server_cert, grpc_server_key, grpc_root_cert;
};
// Serves until SIGTERM or SIGINT, then drains and returns 0; 2 when it cannot start.
int ServeCommand(const ServeArgs& args);

struct BenchEngineArgs {
  std::string model_repo;
  std::string model;
  int64_t version = -1;
  std::string requests;                        // KServe JSON bodies, one per line, all of one size, rotated
  BackendFlags device{"cpu"};                  // cpu | cuda | auto
  std::string precision;                       // fp32 | tf32 | bf16 | bf16-activations; empty: the model config's
  std::string table_dtype;                     // FP32 | BF16 | FP16; empty: the model config's tables.dtype
  std::optional<int64_t> table_gpu_budget_mb;  // unset: the model config's tables.gpu_budget_mb
  double cache_warmup_s = 0;                   // with table caches: seconds of extra warm-up before timing
  int fresh_ids = 0;            // > 0: time this many variants of each request with ids drawn anew (tools/fresh_ids.h)
  uint64_t fresh_ids_seed = 1;  // their draws' seed (runs that must not share rows take different ones)
  std::optional<double> table_cache_percent;    // set: every lookup table cached with this % of its rows
  std::string tables_on_disk;                   // set: every lookup table that may go on disk, written there
  std::optional<int64_t> table_disk_cache_mb;   // unset: the model config's tables.disk_cache_mb
  std::string hotness_snapshot;                 // set: the model config's tables.hotness_snapshot
  std::optional<int64_t> table_host_budget_mb;  // unset: the model config's tables.host_budget_mb
  std::string buckets = "config";               // on | off | config: shape buckets (and, on a GPU, captured graphs)
  std::string cpu_row_split = "config";         // auto | on | off | config: a CPU run's rows over the threads
  bool fusion = true;                           // false: without the fusion passes, to measure what they save
  bool hoisting = true;                         // false: user rows repeated to the candidates, as written
  int warmup = 10;                              // at least one pass over the requests
  int iters = 200;
  int in_flight = 1;  // requests scored at a time, each by its own thread
  int executors = 0;  // executors of the model; 0: the backend's default
  std::string label;
  std::string json_path;     // also write the result here
  std::string csv_path;      // also append the result here as a CSV row (header when new)
  std::string command_line;  // recorded in the output
};
// In-process latency of one request shape; 0 when it ran, 2 when it could not start.
int BenchEngineCommand(const BenchEngineArgs& args);

struct BenchServerArgs {
  std::string protocol = "http";  // http | grpc
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string model;
  std::string version;   // empty: the server's choice
  std::string requests;  // KServe JSON bodies, one per line, sent in rotation
  std::vector<double> rates = {100};
  double seconds = 10;
  double warmup_seconds = 1;
  int connections = 64;
  int client_threads = 4;  // the client's sending threads
  double timeout_seconds = 10;
  bool binary = false;              // HTTP: tensors and scores in KServe's binary extension
  bool typed = false;               // gRPC: typed `contents` (int64_contents, bytes_contents, ...), not raw
  std::string shared_memory;        // "system": tensors in a registered region (shared_memory_bodies.h)
  std::string lengths = "tensor";   // binary and gRPC: a ragged input's lengths as NAME.lengths, or "parameter"
  double p99_target_ms = 0;         // > 0: report the highest rate whose p99 stays under it
  std::string json_path, csv_path;  // JSON goes to stdout when json_path is empty
  std::string command_line;         // recorded in the output
};
// Open-loop load against a running server; 0 when it ran, 2 when it could not start.
int BenchServerCommand(const BenchServerArgs& args);

struct BenchLoadArgs {
  std::string model_repo;
  std::string model;
  int64_t version = -1;
  std::string requests;         // KServe JSON bodies, one per line: the mix, drawn in rotation
  BackendFlags device{"cpu"};   // cpu | cuda | auto
  std::string precision;        // fp32 | tf32 | bf16 | bf16-activations; empty: the model config's
  std::string batching = "on";  // on | off | config
  int executors = 0;            // 0: the backend's default
  std::vector<double> rates = {100};
  double seconds = 10;
  double warmup_seconds = 1;
  int clients = 16;             // threads handing arrivals to the model
  double timeout_seconds = 30;  // how long to wait for the last answers of a rate
  double p99_target_ms = 0;     // > 0: report the highest rate whose p99 stays under it
  std::string json_path;        // JSON goes to stdout when empty
  std::string command_line;     // recorded in the output
};
// Open-loop load in-process (MLPerf's server scenario without the network); 0 when it ran, 2 when
// it could not start.
int BenchLoadCommand(const BenchLoadArgs& args);

struct BenchCacheArgs {
  int64_t rows = 1'000'000;  // the table's rows
  double zipf = 1.05;        // the trace's Zipf exponent
  int64_t accesses = 4'000'000;
  int64_t drift_every = 0;                              // accesses between moves of the hot set; 0: stationary
  int64_t drift_rows = 0;                               // how far the hot set moves each time
  std::vector<int64_t> capacities = {10'000, 100'000};  // cache sizes in rows
  int victim_sample = 0;                                // CachePolicyOptions' sample; 0: its default
  int64_t halve_every = 0;                              // sketch increments between halvings a slot; 0: default
  uint64_t seed = 1;
  std::string snapshot_path;  // round-trip the halfway snapshot through this file
  std::string json_path;      // also write the results here
  std::string command_line;   // recorded in the output
};
// The cache policy on a synthetic trace against Belady's optimum and the static oracle; 0 when it
// ran, 2 when a snapshot could not be written or read.
int BenchCacheCommand(const BenchCacheArgs& args);

struct BenchDiskArgs {
  std::string file;        // the rows' file
  int64_t create_mb = 0;   // > 0: first write a file of this many MiB of random bytes there
  size_t row_bytes = 256;  // a row (W1 mlperf's 128 bf16 values)
  int64_t batch = 4096;    // rows per batch
  double zipf = 0;         // > 0: Zipf ids with this exponent; 0: uniform
  int64_t cache_rows = 0;  // > 0: a host cache of this many rows in front of the file
  int queue_depth = 64;    // reads in flight
  double seconds = 5;      // for the rows; half as long for the ceiling
  uint64_t seed = 1;
  std::string json_path;     // also write the results here
  std::string command_line;  // recorded in the output
};
// Rows read from a file in batches against the disk's own random-read ceiling; 0 when it ran, 2
// when the file could not be made, opened or read.
int BenchDiskCommand(const BenchDiskArgs& args);

}  // namespace rankd
