#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "compile/evaluate.h"
#include "embedding/cache_bounds.h"
#include "embedding/cache_keeper.h"
#include "embedding/cache_policy.h"
#include "embedding/lookup_replay.h"
#include "model/ops/keyed_rows.h"
#include "serving/model.h"
#include "tools/commands.h"
#include "tools/request_file.h"

namespace rankd {
namespace {

// How a BYTES input's strings become its ids, e.g. "  strings: split ',', xxhash64 seed 0 % 100 -> INT64".
std::string StringsSummary(const InputConfig& in) {
  const InputConfig::Strings& s = in.strings;
  if (!s.bytes) return "";
  std::string out = "  strings:";
  if (!s.split.empty()) out += " split '" + s.split + "'" + (s.hash ? "," : " into ids");
  if (s.hash) {
    out += std::string(" ") + StringHashName(*s.hash) +
           (MaxStringHashSeed(*s.hash) ? " seed " + std::to_string(s.seed) : "") + " % " + std::to_string(s.buckets);
  }
  return out + " -> " + DTypeName(in.dtype);
}

std::string Human(int64_t bytes) {
  char buf[32];
  if (bytes >= (int64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  else if (bytes >= (1 << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  return buf;
}

std::string List(const std::vector<int64_t>& sizes) {
  std::string s;
  for (int64_t n : sizes) s += (s.empty() ? "" : ",") + std::to_string(n);
  return "[" + s + "]";
}

// The shape buckets, what warm-up captured and, with `plan`, each warm-up bucket's kernels.
void PrintBuckets(const Model& model, bool plan) {
  const LoadReport& r = model.load_report();
  std::printf("shape buckets (%s): %s\n", model.backend().name(), r.buckets.c_str());
  const ShapeBuckets* b = model.shape_buckets();
  if (!b) return;
  std::printf("  rows %s\n", List(b->rows()).c_str());
  for (size_t k = 0; k < b->lengths().size(); ++k)
    std::printf("  lengths of ragged input %zu %s\n", k, List(b->lengths()[k]).c_str());
  if (r.warmup_captures > 0) {
    std::printf("  graphs captured at warm-up: %d (all executors) in %.1f ms, %s of device memory\n", r.warmup_captures,
                r.warmup_capture_ms, Human(r.warmup_capture_bytes).c_str());
  }
  if (!plan) return;
  if (model.warmup_buckets().empty())
    std::printf("  (no buckets are captured at warm-up here: load with --backend cuda)\n");
  for (const BucketKey& key : model.warmup_buckets()) {
    auto p = model.PlanForBucket(key);
    if (!p.ok()) {
      std::printf("  %s: %s\n", key.ToString().c_str(), p.status().ToString().c_str());
      continue;
    }
    std::map<std::string, int> kernels;
    for (const PlanStep& step : (*p)->steps()) ++kernels[(*p)->graph().nodes[static_cast<size_t>(step.node)].op];
    std::string ops;
    for (const auto& [op, n] : kernels) ops += " " + op + "×" + std::to_string(n);
    std::string launches;
    if (auto l = model.CountLaunches(**p); l.ok()) {
      launches = "; on the device " + std::to_string(l->kernels) + " kernels (" + std::to_string(l->kernels_in_a_row) +
                 " in a row), " + std::to_string(l->copies) + " copies, " + std::to_string(l->memsets) + " memsets";
    }
    std::printf("  plan %-28s %3zu steps, %s workspace%s:%s\n", key.ToString().c_str(), (*p)->steps().size(),
                Human((*p)->workspace_bytes()).c_str(), launches.c_str(), ops.c_str());
  }
}

// Each node as `outputs = Op(inputs)`, with the static shapes the graph records (constants by
// their shape).
void PrintNodes(const Graph& g) {
  auto name = [&g](int v) {
    if (v < 0) return std::string("-");
    const Value& value = g.values[static_cast<size_t>(v)];
    const Tensor* t = g.FindConstant(v);
    return value.name + (t ? ShapeToString(t->shape()) : "");
  };
  std::printf("nodes (after the passes, in order):\n");
  for (const Node& n : g.nodes) {
    std::string outs, ins;
    for (int v : n.outputs) outs += (outs.empty() ? "" : ", ") + name(v);
    for (int v : n.inputs) ins += (ins.empty() ? "" : ", ") + name(v);
    std::printf("  %s = %s(%s)\n", outs.c_str(), n.op.c_str(), ins.c_str());
  }
}

// Each embedding table with where it is kept, and the bytes per tier.
// Keyed tables (tables.keyed): the keys imported, their index (a weight, on the device with the
// others) and the row an unknown key reads.
void PrintKeyedTables(const Model& model) {
  const Graph& g = model.graph();
  std::set<std::string> shown;
  for (const Node& n : g.nodes) {
    if (n.op != "KeyedRows") continue;
    const std::vector<keyed_rows::Part> parts = keyed_rows::Parts(n);
    for (size_t p = 0; p < parts.size(); ++p) {
      const Tensor* index = g.FindConstant(n.inputs[2 * p + 1]);
      auto config = model.config().keyed_tables.find(parts[p].table);
      if (!index || config == model.config().keyed_tables.end() || !shown.insert(parts[p].table).second) continue;
      std::printf(
          "keyed table %s: %lld keys from %s, an index of %lld slots (%s); an unknown key reads row %lld (%g)\n",
          parts[p].table.c_str(), static_cast<long long>(parts[p].default_row), config->second.path.c_str(),
          static_cast<long long>(index->dim(0)), Human(static_cast<int64_t>(index->bytes())).c_str(),
          static_cast<long long>(parts[p].default_row), config->second.default_value);
    }
  }
}

// Where the model runs: a replica per GPU (its config's gpus), each with its own weights and
// executors.
void PrintReplicas(const Model& model) {
  const std::vector<ReplicaState> replicas = model.replicas();
  const std::string executors = model.executors() > 0 ? std::to_string(model.executors()) : "unbounded";
  std::printf("replicas: %zu (%s executors each)\n", replicas.size(), executors.c_str());
  for (const ReplicaState& r : replicas) {
    std::printf("  %s:%d%s\n", r.backend.c_str(), r.device, r.healthy ? "" : "  unhealthy");
  }
}

void PrintTables(const Model& model) {
  const std::vector<TableInfo>& tables = model.tables();
  const int64_t budget = model.config().table_gpu_budget_mb, host_budget = model.config().table_host_budget_mb;
  std::printf(
      "tables: %zu, %s on the GPU, %s in host memory, %s of GPU caches, %s on disk (GPU budget for tables: %s, "
      "host budget: %s)%s\n",
      tables.size(), Human(TierBytes(tables, TableTier::kDevice)).c_str(),
      Human(TierBytes(tables, TableTier::kHost) + TierBytes(tables, TableTier::kCache)).c_str(),
      Human(CachesBytes(tables)).c_str(), Human(TierBytes(tables, TableTier::kDisk)).c_str(),
      budget < 0 ? "none" : Human(budget << 20).c_str(), host_budget < 0 ? "none" : Human(host_budget << 20).c_str(),
      model.backend().device_kind() == DeviceKind::kHost ? " (placement applies on a GPU)" : "");
  std::vector<DiskTableStats> on_disk;
  if (const DiskTables* disk = model.disk_tables()) on_disk = disk->stats();
  for (const TableInfo& t : tables) {
    std::string cache;
    for (const DiskTableStats& d : on_disk) {
      if (d.table != t.name) continue;
      cache = "  host cache of " + std::to_string(d.capacity) + " rows (" + Human(d.capacity * t.row_bytes()) +
              "), rows from " + d.file + (d.direct ? "" : " (through the page cache)");
      if (d.gpu_cache) {
        cache += "; in front of it a GPU cache of " + std::to_string(d.gpu.capacity) + " rows (" +
                 Human(static_cast<int64_t>(d.gpu.device_bytes)) + " on the GPU)";
      }
    }
    if (t.tier == TableTier::kCache) {
      char share[32];
      std::snprintf(share, sizeof(share), "%.1f%%",
                    100.0 * static_cast<double>(t.cache_rows) / static_cast<double>(std::max<int64_t>(t.rows(), 1)));
      cache = "  cache of " + std::to_string(t.cache_rows) + " rows (" + share + "), " +
              Human(CacheBytes(t, t.cache_rows)) + " on the GPU";
    }
    const std::string tier = t.gpus.empty() ? TableTierName(t.tier) : "gpu:" + GpuSetText({false, t.gpus});
    std::printf("  %-32s %-5s  %s %s  %s%s%s\n", t.name.c_str(), tier.c_str(), ShapeToString(t.shape).c_str(),
                DTypeName(t.dtype), Human(t.bytes).c_str(), cache.c_str(),
                t.lookups_only ? "" : "  (also read by other ops)");
  }
}

// How much GPU memory a cache of the model's tables would need for what hit ratio, on the lookups
// of the requests in `path` replayed in order (embedding/cache_policy.h, cache_bounds.h).
int PrintCacheSizing(const Model& model, const std::string& path, std::vector<double> sizes_mb) {
  auto lines = ReadRequestFile(path);
  if (!lines.ok()) {
    std::fprintf(stderr, "rankd inspect: %s\n", lines.status().ToString().c_str());
    return 2;
  }
  const std::vector<TableInfo>& tables = model.tables();
  // Ids the graph computes from inputs are computed on the CPU and traced, and each request's
  // lookups sampled, as the server's cache keeper does (embedding/cache_keeper.h).
  LookupReplay replay(model.graph(), tables, CacheKeeperOptions{}.sample_ids,
                      [](const Node& n, const std::vector<const Tensor*>& in) { return EvaluateNode(n, in); });
  for (const RequestLine& line : *lines) {
    auto prepared = model.PrepareForInspection(line.request);
    if (!prepared.ok()) {
      std::fprintf(stderr, "rankd inspect: %s\n", prepared.status().ToString().c_str());
      return 2;
    }
    if (Status failed = replay.Add(prepared->inputs); !failed.ok())
      std::fprintf(stderr, "warning: ids a lookup computes are not traced: %s\n", failed.ToString().c_str());
  }
  const std::vector<uint64_t>& trace = replay.all();
  if (trace.empty()) {
    std::printf("cache sizing: the requests look up no table\n");
    return 0;
  }
  // A slot holds a row of the table it caches: the lookups' mean row size prices a slot.
  double row_bytes = 0;
  for (uint64_t key : trace) {
    const TableInfo& t = tables[static_cast<size_t>(key >> 48)];
    row_bytes += static_cast<double>(t.bytes) / static_cast<double>(std::max<int64_t>(t.shape[0], 1));
  }
  row_bytes /= static_cast<double>(trace.size());
  if (sizes_mb.empty()) {  // 1%, 5%, 20% and 50% of the tables
    double all = 0;
    for (const TableInfo& t : tables) all += static_cast<double>(t.bytes);
    for (double share : {0.01, 0.05, 0.2, 0.5}) sizes_mb.push_back(all * share / (1 << 20));
  }
  std::printf(
      "cache sizing from %zu requests: %zu lookups, a row %.0f bytes on average (policy: fed every lookup; "
      "served: fed the %zu the server's keeper samples; Belady: the optimum; oracle: the most looked-up rows, "
      "fixed)\n",
      lines->size(), trace.size(), row_bytes, replay.seen().size());
  std::printf("  %12s %12s %8s %8s %8s %8s\n", "GPU memory", "rows", "policy", "served", "belady", "oracle");
  for (double mb : sizes_mb) {
    const auto capacity = std::max<int64_t>(1, static_cast<int64_t>(mb * (1 << 20) / row_bytes));
    CachePolicyOptions options;
    options.capacity = capacity;
    options.record_changes = false;
    CachePolicy policy(options);
    int64_t hits = 0;
    for (uint64_t key : trace) hits += policy.Access(key) ? 1 : 0;
    const auto n = static_cast<double>(trace.size());
    std::printf("  %12s %12lld %8.4f %8.4f %8.4f %8.4f\n", Human(static_cast<int64_t>(mb * (1 << 20))).c_str(),
                static_cast<long long>(capacity), static_cast<double>(hits) / n, replay.ServedHitRatio(capacity),
                static_cast<double>(BeladyHits(trace, capacity)) / n,
                static_cast<double>(StaticOracleHits(trace, capacity)) / n);
  }
  return 0;
}

}  // namespace

int InspectCommand(const InspectArgs& args) {
  std::string dir = (std::filesystem::path(args.model_repo) / args.model).string();
  auto backend = OpenBackend(args.device);
  if (!backend.ok()) {
    std::fprintf(stderr, "rankd inspect: %s\n", backend.status().ToString().c_str());
    return 2;
  }
  ModelOptions options;
  options.backend = *backend;
  options.gpus = GpusFlag(args.device);
  options.fusion = args.fusion;
  options.user_hoisting = args.hoisting ? -1 : 0;
  options.table_dtype = args.table_dtype;
  if (args.table_gpu_budget_mb) options.table_gpu_budget_mb = *args.table_gpu_budget_mb;
  if (args.table_cache_percent) options.table_cache_fraction = *args.table_cache_percent / 100.0;
  options.table_host_budget_mb = args.table_host_budget_mb;
  auto loaded = Model::Load(dir, args.version, options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "rankd inspect: %s\n", loaded.status().ToString().c_str());
    return 2;
  }
  const Model& model = **loaded;
  const Graph& g = model.graph();
  std::printf("model %s version %lld (opset %lld)%s\n", model.name().c_str(), static_cast<long long>(model.version()),
              static_cast<long long>(g.opset), model.config().derived ? ", config derived from the graph" : "");
  std::printf("inputs:\n");
  for (const InputConfig& in : model.config().inputs) {
    std::printf("  %-24s %-6s [rows%s%s]%s%s%s\n", in.name.c_str(), in.strings.bytes ? "BYTES" : DTypeName(in.dtype),
                in.dims.empty() ? "" : ", ",
                ShapeToString(in.dims).substr(1, ShapeToString(in.dims).size() - 2).c_str(),
                in.scope == InputScope::kUser ? "  scope=user" : "", in.ragged ? "  ragged" : "",
                (StringsSummary(in) + (in.offsets_input.empty() ? "" : "  starts into " + in.offsets_input) +
                 (in.paired_with.empty() ? "" : "  weights of " + in.paired_with))
                    .c_str());
  }
  std::printf("outputs:\n");
  for (int id : g.outputs) {
    const Value& v = g.values[static_cast<size_t>(id)];
    std::printf("  %-24s %-6s\n", v.name.c_str(), DTypeName(v.dtype));
  }
  const LoadReport& r = model.load_report();
  std::printf(
      "passes: %d splits lowered, %d Gelus lowered, %d nodes folded, %d dead nodes removed, %d embedding bags "
      "recognised, %d layer norms recognised, %d concatenations of bags fused, %d tables merged into others, %d "
      "epilogues fused, "
      "%d products of concatenations split, %d sibling products merged, %d expansions read as broadcasts, %d "
      "multiply-adds fused, %d multiply-adds "
      "fused into products, %d attention units fused, %d softmax attentions fused, %d dot interactions fused, %d "
      "element-wise chains fused, %d ragged inputs, %d string inputs hashed by the backend, "
      "%d tables stored as %s\n",
      r.lowered_splits, r.lowered_gelus, r.folded_nodes, r.removed_nodes, r.fused_embedding_bags + r.fused_segment_bags,
      r.fused_layer_norms, r.fused_embedding_concats, r.merged_tables, r.fused_epilogues, r.split_products,
      r.merged_products, r.unexpanded_broadcasts, r.fused_mul_adds, r.fused_product_mul_adds, r.fused_attention,
      r.fused_softmax_attention, r.fused_dot_interactions, r.fused_elementwise, r.ragged_inputs, r.hashed_string_inputs,
      r.narrowed_tables, DTypeName(model.config().table_dtype));
  PrintKeyedTables(model);
  std::printf("user-side hoisting: %s\n", r.hoisting.c_str());
  std::printf("rows over the CPU's threads: %s\n", r.row_split.c_str());
  if (!r.hoisting_gathers.empty()) {
    std::printf("  gathered per candidate:");
    for (size_t i = 0; i < r.hoisting_gathers.size(); ++i)
      std::printf("%s %s", i ? "," : "", r.hoisting_gathers[i].c_str());
    std::printf("\n");
  }
  if (const BatchPolicyOptions* b = model.batch_policy()) {
    std::printf(
        "batching: cost = %.4g us/row + %.4g us/sequence id + %.4g us/request, budget %.4g, "
        "max %lld rows, delay %lld us, queue %zu\n",
        b->cost_per_row, b->cost_per_seq, b->cost_per_request, b->cost_budget,
        static_cast<long long>(b->max_batch_rows), static_cast<long long>(b->max_queue_delay.count()), b->max_enqueued);
  } else {
    std::printf("batching: off\n");
  }
  PrintBuckets(model, args.plan);
  std::printf("ops (%zu nodes):\n", g.nodes.size());
  for (const auto& [op, count] : g.OpCounts()) std::printf("  %-20s %d\n", op.c_str(), count);
  if (args.plan) {  // what each fused element-wise node computes (model/ops/elementwise_program.h)
    for (const Node& n : g.nodes) {
      if (n.op == "FusedElementwise") std::printf("  %s: %s\n", n.name.c_str(), n.GetString("program", "").c_str());
    }
  }
  if (args.nodes) PrintNodes(g);
  PrintTables(model);
  std::printf("weights and tables in all: %s\n", Human(g.ConstantBytes()).c_str());
  PrintReplicas(model);
  return args.requests.empty() ? 0 : PrintCacheSizing(model, args.requests, args.cache_mb);
}

}  // namespace rankd
