// CompiledModel: the load-time passes in their order, the graph inputs' bindings, and the plan cache.
#include "compile/compiled_model.h"

#include <algorithm>
#include <limits>

#include "compile/passes.h"
#include "compile/shared_constants.h"
#include "model/ops/hash_strings.h"

namespace rankd {

std::vector<TensorMeta> MetasOf(const PreparedRequest& prepared, const Graph& graph) {
  std::vector<TensorMeta> metas;
  metas.reserve(prepared.inputs.size());
  for (size_t i = 0; i < prepared.inputs.size(); ++i) {
    metas.push_back({graph.values[static_cast<size_t>(graph.inputs[i])].dtype, prepared.inputs[i].shape(), nullptr});
  }
  return metas;
}

StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::Compile(Graph graph, ModelConfig config,
                                                                const CompileOptions& options) {
  std::unique_ptr<CompiledModel> model(new CompiledModel());
  model->graph_ = std::move(graph);
  model->config_ = std::move(config);
  model->options_ = options;
  RANKD_RETURN_IF_ERROR(model->RunPasses());
  return model;
}

Status CompiledModel::RunPasses() {
  RANKD_RETURN_IF_ERROR(ResolveModelConfig(graph_, config_));
  RANKD_ASSIGN_OR_RETURN(precision_,
                         ParsePrecision(options_.precision.empty() ? config_.precision : options_.precision));
  // First: TensorFlow's segment sums hold ops no backend runs (TopK, Unique, ScatterND, NonZero).
  RANKD_ASSIGN_OR_RETURN(report_.fused_segment_bags, FuseSegmentBags(graph_));
  RANKD_ASSIGN_OR_RETURN(report_.lowered_splits, LowerSplits(graph_));  // not a fusion: there is no Split kernel
  RANKD_ASSIGN_OR_RETURN(report_.lowered_gelus, LowerGelus(graph_));    // nor a Gelu kernel
  RANKD_ASSIGN_OR_RETURN(report_.folded_nodes, FoldConstants(graph_));
  report_.removed_nodes = RemoveDeadNodes(graph_);
  // Every node well formed (its op known, its inputs there) before the passes below read it; the
  // CPU backend, the reference, has every op an imported model may hold.
  RANKD_RETURN_IF_ERROR(CpuBackend().CheckGraph(graph_));
  if (options_.fusion) {
    report_.fused_embedding_bags = FuseMaskedEmbeddingBags(graph_);
    report_.fused_layer_norms = FuseDecomposedLayerNorms(graph_);
  }
  std::vector<std::string> offsets_inputs, paired_with;
  for (const InputConfig& in : config_.inputs) {
    if (!in.ragged) continue;
    ragged_names_.push_back(in.name);
    offsets_inputs.push_back(in.offsets_input);
    paired_with.push_back(in.paired_with);
  }
  report_.ragged_inputs = static_cast<int>(ragged_names_.size());
  RANKD_RETURN_IF_ERROR(ApplyRaggedInputs(graph_, ragged_names_, offsets_inputs, paired_with));
  RANKD_ASSIGN_OR_RETURN(report_.keyed_tables, KeyTables(graph_, config_.keyed_tables));
  RANKD_ASSIGN_OR_RETURN(report_.hashed_string_inputs, HashStringsInGraph(graph_, config_.inputs));
  if (!options_.table_dtype.empty()) {
    DType d = DTypeFromName(options_.table_dtype).value_or(DType::kInvalid);
    if (d != DType::kF32 && d != DType::kBF16 && d != DType::kF16)
      return InvalidArgument("table dtype must be FP32, BF16 or FP16");
    config_.table_dtype = d;
  }
  report_.narrowed_tables = StoreTablesAs(graph_, config_.table_dtype);  // before hoisting copies the graph
  BindGraphInputs();
  RANKD_RETURN_IF_ERROR(SplitProducts());
  if (options_.fusion) report_.fused_epilogues = FuseGemmEpilogues(graph_);  // after the split: it reads bare products
  Graph unhoisted = graph_;  // shares the constants; kept until the caller has checked the hoisted graph
  RANKD_RETURN_IF_ERROR(StartHoisting().WithContext("user-side hoisting"));
  if (options_.fusion) {  // after hoisting, which runs user-side bags once per user before any concat
    report_.fused_embedding_concats = FuseEmbeddingConcats(graph_);
    report_.merged_tables = MergeTablesSharingIds(graph_);
    report_.merged_key_lookups = MergeKeyedRows(graph_);
    if (hoisted_) {
      FuseEmbeddingConcats(unhoisted);
      MergeTablesSharingIds(unhoisted);
      MergeKeyedRows(unhoisted);
    }
  }
  if (hoisted_) unhoisted_ = std::move(unhoisted);
  RANKD_RETURN_IF_ERROR(FuseAfterHoisting());
  RANKD_RETURN_IF_ERROR(options_.backend->CheckGraph(graph_));
  for (int id : graph_.outputs) output_names_.push_back(graph_.values[static_cast<size_t>(id)].name);
  // Last, once no pass will rewrite a constant: tables equal to those of a model already loaded
  // (the version this one replaces) are held once. The graph as written shares its merged tables
  // with the hoisted one's.
  report_.shared_constant_bytes = ShareEqualConstants(graph_);
  if (unhoisted_) ShareEqualConstants(*unhoisted_);
  return Status::Ok();
}

Status CompiledModel::Unhoist(const std::string& why) {
  if (!hoisted_ || !unhoisted_) return Internal("the graph is not hoisted");
  report_.hoisting = "off: " + why;
  report_.hoisting_gathers.clear();
  hoisted_ = false;
  graph_ = std::move(*unhoisted_);
  unhoisted_.reset();
  BindGraphInputs();
  RANKD_RETURN_IF_ERROR(FuseAfterHoisting());
  RANKD_RETURN_IF_ERROR(options_.backend->CheckGraph(graph_));
  ClearPlans();
  return Status::Ok();
}

Status CompiledModel::EditGraph(const std::function<Status(Graph&)>& edit) {
  RANKD_RETURN_IF_ERROR(edit(graph_));
  RANKD_RETURN_IF_ERROR(options_.backend->CheckGraph(graph_));
  ClearPlans();
  return Status::Ok();
}

void CompiledModel::KeepPlans(size_t count) { options_.max_plans = std::max(options_.max_plans, count); }

void CompiledModel::ClearPlans() {
  MutexLock lock(mu_);
  plans_.clear();
  plan_order_.clear();
}

StatusOr<std::shared_ptr<const Plan>> CompiledModel::PlanFor(const std::vector<TensorMeta>& graph_inputs,
                                                             const std::vector<int64_t>& ragged_max_lengths) const {
  // The key: each input's dtype, rank and dims, then the ragged lengths, as raw bytes in one
  // buffer (this runs every request; no text is made, and the rank makes the layout unambiguous).
  std::string key;
  auto append = [&key](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  key.reserve(sizeof(int64_t) * (8 * graph_inputs.size() + ragged_max_lengths.size() + 1));
  for (const TensorMeta& m : graph_inputs) {
    append(static_cast<int64_t>(m.dtype));
    append(static_cast<int64_t>(m.shape.size()));
    for (int64_t d : m.shape) append(d);
  }
  append(static_cast<int64_t>(ragged_max_lengths.size()));
  for (int64_t len : ragged_max_lengths) append(len);
  {
    MutexLock lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
  }
  PlanOptions options;
  options.backend = options_.backend;
  options.ragged_max_lengths = ragged_max_lengths;
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, Plan::Build(graph_, graph_inputs, options));
  MutexLock lock(mu_);
  if (plans_.emplace(key, plan).second) {
    plan_order_.push_back(key);
    if (plan_order_.size() > options_.max_plans) {
      plans_.erase(plan_order_.front());
      plan_order_.erase(plan_order_.begin());
    }
  }
  return plan;
}

void CompiledModel::BindGraphInputs() {
  // ApplyRaggedInputs put each (values, offsets) pair where the input was; the hoisting pass
  // appends rankd.request_index.
  bindings_.clear();
  for (int id : graph_.inputs) {
    const std::string& name = graph_.values[static_cast<size_t>(id)].name;
    if (hoisted_ && name == "rankd.request_index") {
      bindings_.push_back({std::numeric_limits<size_t>::max(), {GraphInputKind::kRequestIndex, -1, false}});
      continue;
    }
    for (size_t c = 0; c < config_.inputs.size(); ++c) {
      const InputConfig& in = config_.inputs[c];
      int ragged =
          static_cast<int>(std::find(ragged_names_.begin(), ragged_names_.end(), in.name) - ragged_names_.begin());
      bool user = hoisted_ && in.scope == InputScope::kUser;
      if (!in.ragged && name == in.name) bindings_.push_back({c, {GraphInputKind::kDense, -1, user}});
      if (in.ragged && name == in.name + ".values") bindings_.push_back({c, {GraphInputKind::kValues, ragged, user}});
      if (in.ragged && name == in.name + ".offsets") bindings_.push_back({c, {GraphInputKind::kOffsets, ragged, user}});
    }
  }
  RANKD_CHECK(bindings_.size() == graph_.inputs.size());
  input_kinds_.clear();
  for (const InputBinding& b : bindings_) input_kinds_.push_back(b.kind);
}

StatusOr<CompiledModel::ShapeProbe> CompiledModel::ProbeShapes() const {
  // User rows repeated to an odd number of candidates (so no other dimension is mistaken for the
  // rows), ragged rows of at most 3 ids.
  ShapeProbe probe;
  std::vector<TensorMeta> metas;
  std::vector<std::pair<int, int>> user_ragged(ragged_names_.size(), {-1, -1});
  PlanOptions options;
  for (const std::string& name : ragged_names_) {
    options.ragged_max_lengths.push_back(std::min<int64_t>(3, config_.FindInput(name)->max_length));
  }
  for (size_t i = 0; i < bindings_.size(); ++i) {
    const InputBinding& b = bindings_[i];
    if (b.kind.part == GraphInputKind::kRequestIndex) {  // a hoisted graph: candidate i reads user row i
      metas.push_back({DType::kI64, {ShapeProbe::kRows}, nullptr});
      continue;
    }
    const InputConfig& in = config_.inputs[b.config_index];
    bool user = in.scope == InputScope::kUser;
    int id = graph_.inputs[i];
    if (b.kind.part == GraphInputKind::kDense) {
      Shape s{ShapeProbe::kRows};
      for (int64_t d : in.dims) s.push_back(d < 0 ? 1 : d);
      if (in.HashedByBackend()) s.push_back(hash_strings::kRecordWidth);
      metas.push_back({in.HashedByBackend() ? DType::kI64 : in.dtype, s, nullptr});
      if (user) probe.user_rows.push_back(id);
    } else if (b.kind.part == GraphInputKind::kValues) {
      metas.push_back(
          {in.dtype, {ShapeProbe::kRows * options.ragged_max_lengths[static_cast<size_t>(b.kind.ragged)]}, nullptr});
      if (user) user_ragged[static_cast<size_t>(b.kind.ragged)].first = id;
    } else {
      metas.push_back({DType::kI64, {ShapeProbe::kRows + 1}, nullptr});
      if (user) user_ragged[static_cast<size_t>(b.kind.ragged)].second = id;
    }
  }
  for (auto pair : user_ragged) {
    if (pair.first >= 0) probe.user_ragged.push_back(pair);
  }
  RANKD_ASSIGN_OR_RETURN(probe.plan, Plan::Build(graph_, metas, options));
  return probe;
}

Status CompiledModel::SplitProducts() {
  if (!options_.fusion) return Status::Ok();
  auto probe = ProbeShapes();
  if (!probe.ok()) return Status::Ok();  // planned (and refused, if it must be) later, with its real shapes
  report_.split_products = SplitConcatProducts(graph_, probe->plan->values());
  report_.unexpanded_broadcasts = ReadBroadcastsUnexpanded(graph_);
  report_.fused_mul_adds = FuseMulAdd(graph_, probe->plan->values());
  return Status::Ok();
}

Status CompiledModel::FuseAfterHoisting() {
  if (!options_.fusion) return Status::Ok();
  auto probe = ProbeShapes();
  if (!probe.ok()) return Status::Ok();  // planned (and refused, if it must be) later, with its real shapes
  report_.fused_attention = FuseTargetAttention(graph_, probe->plan->values());
  report_.fused_softmax_attention = FuseSoftmaxAttention(graph_, probe->plan->values());
  if (report_.fused_attention + report_.fused_softmax_attention > 0) {  // gathers only the attention read are gone
    std::vector<std::string> kept;
    for (const std::string& name : report_.hoisting_gathers) {
      for (const Node& n : graph_.nodes) {
        if (n.name == "hoist.gather." + name) kept.push_back(name);
      }
    }
    report_.hoisting_gathers = kept;
    if (hoisted_) DescribeHoisting();
    probe = ProbeShapes();
    if (!probe.ok()) return probe.status().WithContext("after fusing attention");
  }
  report_.fused_dot_interactions =
      FuseDotInteractions(graph_, probe->plan->values());   // adds no value a later pass reads
  if (options_.backend->TakesProductMulAdds(precision_)) {  // before the chains, which would take the MulAdds
    // It adds no value and changes none's shape, so the probe's shapes still hold for the chains.
    report_.fused_product_mul_adds = FuseProductMulAdds(graph_, probe->plan->values());
  }
  report_.fused_elementwise = FuseElementwiseChains(graph_, probe->plan->values());
  // Last: it adds values the probe's shapes do not cover.
  if (const int64_t min_weights = options_.backend->SiblingProductsMinWeights(); min_weights > 0)
    report_.merged_products = MergeSiblingProducts(graph_, min_weights);
  return Status::Ok();
}

void CompiledModel::DescribeHoisting() {
  report_.hoisting = "on: " + std::to_string(report_.hoisted_nodes) + " nodes run once per user (" +
                     std::to_string(report_.hoisted_compute_nodes) + " computing), " +
                     std::to_string(report_.hoisting_gathers.size()) + " values gathered to the candidates";
}

Status CompiledModel::StartHoisting() {
  bool allowed = options_.user_hoisting >= 0 ? options_.user_hoisting == 1 : config_.user_hoisting;
  bool users = false, candidates = false;
  for (const InputConfig& in : config_.inputs) {
    users = users || in.scope == InputScope::kUser;
    candidates = candidates || in.scope == InputScope::kItem;
  }
  if (!allowed) {
    report_.hoisting = "off (config)";
    return Status::Ok();
  }
  if (!users || !candidates) {
    report_.hoisting = users ? "off (no candidate inputs)" : "off (no user inputs)";
    return Status::Ok();
  }
  // The pass reads ranks and row counts from a plan of the graph as written.
  auto probe = ProbeShapes();
  if (!probe.ok()) {
    report_.hoisting = "off: the graph could not be planned for the pass (" + probe.status().ToString() + ")";
    return Status::Ok();
  }
  HoistReport r = HoistUserSide(graph_, probe->user_rows, probe->user_ragged, probe->plan->values(), ShapeProbe::kRows);
  if (!r.hoisted) {
    report_.hoisting = "off: " + r.why_not;
    return Status::Ok();
  }
  hoisted_ = true;
  report_.hoisting_gathers = r.gathered;
  report_.hoisted_nodes = r.user_nodes;
  report_.hoisted_compute_nodes = r.user_compute_nodes;
  BindGraphInputs();
  DescribeHoisting();
  return Status::Ok();
}

}  // namespace rankd
