// ModelConfig: the small config beside a model (REPO/NAME/config.yaml or config.json).
//
// Every field is optional; a model with no config file gets one derived from its graph (every
// input per candidate, batch dimension first). The schema, with the knobs later subsystems read,
// is documented in docs/config.md. Unknown top-level keys are errors, so typos do not pass silently.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/string_hash.h"
#include "model/graph.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

enum class InputScope { kItem, kUser };

struct InputConfig {
  std::string name;
  DType dtype = DType::kInvalid;
  Shape dims;                            // per-row shape, batch dimension excluded; -1 = any size
  InputScope scope = InputScope::kItem;  // kUser: one row per request, shared by its candidates
  bool ragged = false;                   // a variable-length list of ids per row
  int64_t max_length = 4096;             // ragged: longest list accepted per row
  // ragged, for a graph that takes flat ids and their bags' starts (PyTorch's nn.EmbeddingBag):
  // the graph input the starts go to. Clients send the ids as any ragged input; the graph's ids
  // input is then [ids], and this one is not a request input.
  std::string offsets_input;
  // ragged FP32, for a graph that takes padded ids and a padded value per id slot (TensorFlow's
  // weighted categorical column: ids and weights [batch, slots]): the ragged ids input these values
  // weight, sent as flat values with its lengths.
  std::string paired_with;
  // datatype BYTES: strings on the wire, turned into the graph's ids (`dtype`) as `strings` says.
  struct Strings {
    bool bytes = false;
    std::optional<StringHash> hash;  // each string (or piece) to hash(s, seed) % buckets
    uint64_t seed = 0;
    int64_t buckets = 0;
    std::string split;          // a row's string split on this delimiter into its list; pieces not
                                // hashed are parsed as decimal ids
    bool utf8 = false;          // refuse strings that are not valid UTF-8
    int64_t max_bytes = 65536;  // the longest string accepted
  } strings;

  // Whether the model's backend hashes this input's strings (compile/string_inputs.cc): one id per
  // string, neither split nor ragged. Other BYTES inputs are turned into ids on the host.
  bool HashedByBackend() const { return strings.bytes && strings.hash && strings.split.empty() && !ragged; }
};

struct OutputConfig {
  std::string name;
};

struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific } kind = Kind::kLatest;
  int64_t latest = 1;
  std::vector<int64_t> versions;
};

// The batcher's knobs (docs/batching.md), with Triton's names where Triton has the knob. Every
// model batches unless its section says `enabled: false`; without a section (`configured` false)
// it batches with no queue delay, and a model whose outputs change when requests are merged is
// served without batching instead of failing to load. Cost coefficients left negative are
// measured at warm-up.
struct BatchingConfig {
  bool enabled = true;
  bool configured = false;                    // the config has a batching section
  int64_t max_queue_delay_microseconds = 0;   // 500 when the section does not say
  int64_t max_batch_size = 0;                 // rows per merged batch; 0 = the model's request limit
  int64_t max_queue_size = 1024;              // queued requests; past this new ones get UNAVAILABLE
  int64_t max_queue_wait_microseconds = -1;   // the queue's head waited longer: new ones get UNAVAILABLE;
                                              // 0 = none, -1 (not given) = automatic once the queue stands
  int64_t default_timeout_microseconds = 0;   // a request's deadline when it sets none; 0 = none
  int priority_levels = 0;                    // requests may say priority 1 (highest) .. levels
  int default_priority_level = 0;             // priority of requests that give none; 0 = the lowest
  int executors = 0;                          // batches in flight at once; 0 = the model's executors
  std::vector<int64_t> preferred_batch_size;  // rows at which a forming batch goes at once
  double cost_per_row = -1;
  double cost_per_sequence_element = -1;
  double cost_per_request = -1;
  double cost_budget = -1;
};

// Shape buckets (docs/buckets.md): requests are padded up to a bucket of rows and, per ragged
// input, of row length, so a few plans (and on a GPU, captured graphs) serve every request.
struct ShapeBucketsConfig {
  int enabled = -1;                          // 1 on, 0 off, -1 = the backend's default (on for GPUs)
  std::vector<int64_t> allowed_batch_sizes;  // TF Serving's name; empty = powers of two to the row limit
  std::vector<int64_t> allowed_lengths;      // ragged row lengths; empty = powers of two; max_length always added
  bool cuda_graphs = true;                   // capture each bucket's plan as a CUDA graph
  int64_t warmup_max_batch_size = 1024;      // buckets up to this many rows are captured before ready
  int64_t max_graph_memory_mb = 2048;        // per executor, workspace + graphs captured at warm-up
};

// A keyed table (tables.keyed.NAME): its rows and their keys, imported at load, replace the
// graph's table; a lookup reads the row of its key, or a row of `default_value` for a key the
// files do not hold.
struct KeyedTableConfig {
  std::string
      path;  // a folder with `key` and `emb_vector` (model/keyed_table_files.h); relative: to the model's folder
  float default_value = 0.0f;
};

// The GPUs a model is replicated on: a replica on each (its own copy of the weights, executors and
// captured graphs; docs/replicas.md). Empty (neither `all` nor ids): the server's choice.
struct GpuSet {
  bool all = false;      // every GPU the process sees
  std::vector<int> ids;  // else these, by CUDA's numbering, in order, each once
  bool empty() const { return !all && ids.empty(); }
};
// "all", or GPU indices separated by commas ("0,1"); errors say what is wrong.
StatusOr<GpuSet> ParseGpuSet(const std::string& text);
// "all" or "0,1"; "" when empty.
std::string GpuSetText(const GpuSet& gpus);

// routing.cpu: whether a model on a GPU also holds plans on the CPU, and which runs go there
// (serving/route_policy.h, docs/routing.md).
enum class CpuRouting : uint8_t {
  kOff,       // every run on the model's device; no CPU plans
  kFallback,  // on the device while it can run work, on the CPU once it cannot
  kRows,      // runs of at most cpu_max_rows rows on the CPU while it has a free run
  kCost,      // where the fitted costs and the device's queue say the run ends first
};
StatusOr<CpuRouting> ParseCpuRouting(const std::string& text);
const char* CpuRoutingName(CpuRouting routing);

// cpu_row_split: whether a run on the CPU backend splits its rows over the CPU's threads, each part
// run whole by one thread (serving/row_split.h, docs/engine.md).
enum class CpuRowSplit : uint8_t {
  kAuto,  // where timing both ways at load found the split faster
  kOn,    // every run of 8 rows or more
  kOff,   // never: each op splits its own work over the threads
};
StatusOr<CpuRowSplit> ParseCpuRowSplit(const std::string& text);
const char* CpuRowSplitName(CpuRowSplit split);

struct RoutingConfig {
  CpuRouting cpu = CpuRouting::kOff;
  int64_t cpu_max_rows = 0;  // with rows: the largest run (a merged batch's rows together) sent to the CPU
  int cpu_runs = 1;          // runs on the CPU at once
};

struct ModelConfig {
  std::string name;
  int64_t max_batch_size = 0;      // rows per request accepted; 0 = the server's limit
  std::string precision = "fp32";  // fp32 | tf32 | bf16 | bf16-activations (backend.h)
  bool user_hoisting = true;       // run the user-only part of the graph once per user (docs/hoisting.md)
  int executors = 0;  // requests run at once per replica (Triton's instance_group count); 0: the backend's default
  GpuSet gpus;        // gpus: where a CUDA model's replicas run (Triton's instance_group gpus)
  std::vector<InputConfig> inputs;
  std::vector<OutputConfig> outputs;
  VersionPolicy version_policy;
  BatchingConfig batching;
  ShapeBucketsConfig buckets;
  RoutingConfig routing;
  CpuRowSplit cpu_row_split = CpuRowSplit::kAuto;
  // tables.dtype: how embedding tables read only by bags are stored (FP32, or BF16 / FP16
  // rounded at load).
  DType table_dtype = DType::kF32;
  // tables.gpu_budget_mb: device memory for embedding tables; the tables past it are kept in host
  // memory (docs/embedding.md). -1: no budget, every table on the device.
  int64_t table_gpu_budget_mb = -1;
  // tables.tiers: a table's tier ("gpu", "cache", "host" or "disk") by its name, whatever the
  // budget decides.
  std::map<std::string, std::string> table_tiers;
  // tables.shard_over_gpus: with a budget and replicas on several GPUs, the tables no replica keeps
  // are placed once over the replicas' GPUs (whole, or their rows split) before any is cached.
  bool table_shard_over_gpus = false;
  // tables.cache_rows: a table cached on the GPU with a cache of this many rows, by its name.
  std::map<std::string, int64_t> table_cache_rows;
  // tables.disk_dir: where tables on disk that the load holds in memory are written (relative: to
  // the model's folder); empty: such a table is a load error.
  std::string table_disk_dir;
  // tables.disk_cache_mb: host memory for the rows of tables on disk; -1: a tenth of their bytes.
  int64_t table_disk_cache_mb = -1;
  // tables.host_budget_mb: host memory for the tables not on the GPU (host and cached tables' rows,
  // the host caches of tables on disk); past it, tables go on disk (docs/embedding.md). -1: none.
  int64_t table_host_budget_mb = -1;
  // tables.hotness_snapshot: the file the GPU caches start warm from and are saved to (empty: none).
  std::string table_hotness_snapshot;
  // tables.keyed: tables whose lookups read 64-bit keys, by the table's name (docs/embedding.md).
  std::map<std::string, KeyedTableConfig> keyed_tables;
  bool derived = false;  // true when there was no config file
  // What a config.pbtxt sets that rankd does not use, one entry per field (Model::Load reports
  // them in one warning).
  std::vector<std::string> unused;

  const InputConfig* FindInput(const std::string& name) const;
};

// Parses a config from JSON text, or YAML when `yaml` is true. Errors name the field.
StatusOr<ModelConfig> ParseModelConfig(const std::string& text, bool yaml);
// Parses Triton's config.pbtxt (model/triton_text_config.h); `unused` lists what it sets that rankd
// does not use.
StatusOr<ModelConfig> ParseTritonModelConfig(const std::string& text);
// The same from Triton's ModelConfig in protobuf's JSON form (a load's config override, as
// tritonclient's load_model(config=...) sends it). A field of Triton's schema that rankd's part of
// it lacks is an error naming it.
StatusOr<ModelConfig> ParseTritonModelConfigJson(const std::string& text);
// Reads DIR/config.yaml, config.yml or config.json, else Triton's DIR/config.pbtxt
// (model/triton_text_config.h); a config with derived=true when none exists.
StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);
// Fills in what the config leaves out from the graph's signature, and checks that the two agree:
// every graph input is described, dtypes match, ragged inputs are rank-2 integer ids.
Status ResolveModelConfig(const Graph& graph, ModelConfig& config);

}  // namespace rankd
