// Model: the load-time rewrites that need value shapes: the product split (docs/passes.md) and
// user-side hoisting (docs/hoisting.md). The passes themselves are in compile/.
#include <algorithm>
#include <limits>

#include "compile/passes.h"
#include "serving/model.h"

namespace rankd {

void Model::BindGraphInputs() {
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
}

StatusOr<Model::ShapeProbe> Model::ProbeShapes() const {
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
    const Binding& b = bindings_[i];
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
      metas.push_back({in.dtype, s, nullptr});
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

Status Model::SplitProducts() {
  if (!options_.fusion) return Status::Ok();
  auto probe = ProbeShapes();
  if (!probe.ok()) return Status::Ok();  // planned (and refused, if it must be) later, with its real shapes
  report_.split_products = SplitConcatProducts(graph_, probe->plan->values());
  report_.unexpanded_broadcasts = ReadBroadcastsUnexpanded(graph_);
  report_.fused_mul_adds = FuseMulAdd(graph_, probe->plan->values());
  return Status::Ok();
}

Status Model::FuseAfterHoisting(Precision precision) {
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
      FuseDotInteractions(graph_, probe->plan->values());  // adds no value a later pass reads
  const Backend& target = options_.backend ? *options_.backend : CpuBackend();
  if (target.TakesProductMulAdds(precision)) {  // before the chains, which would take the MulAdds
    // It adds no value and changes none's shape, so the probe's shapes still hold for the chains.
    report_.fused_product_mul_adds = FuseProductMulAdds(graph_, probe->plan->values());
  }
  report_.fused_elementwise = FuseElementwiseChains(graph_, probe->plan->values());
  return Status::Ok();
}

void Model::DescribeHoisting() {
  report_.hoisting = "on: " + std::to_string(report_.hoisted_nodes) + " nodes run once per user (" +
                     std::to_string(report_.hoisted_compute_nodes) + " computing), " +
                     std::to_string(report_.hoisting_gathers.size()) + " values gathered to the candidates";
}

Status Model::StartHoisting() {
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

std::string Model::CheckHoisting() const {
  // One user scored with its rows once, and with its rows repeated to every candidate: the second
  // is what the graph as written computes (the gathers pick row i for candidate i).
  constexpr int64_t kCandidates = 5;
  InferRequest once = ExampleRequest(kCandidates, 3);
  RandomizeFloats(once, 4242);
  InferRequest repeated = once;
  for (size_t c = 0; c < config_.inputs.size(); ++c) {
    if (config_.inputs[c].scope != InputScope::kUser) continue;
    InferInput& in = repeated.inputs[c];
    in.data = RepeatRows(in.data, kCandidates);
    if (!in.lengths.empty()) in.lengths.assign(static_cast<size_t>(kCandidates), in.lengths[0]);
  }
  PreparedRequest a, b;
  Status s = BuildGraphInputs(once, a);
  if (s.ok()) s = BuildGraphInputs(repeated, b);
  if (!s.ok()) return "the check request is refused: " + s.ToString();
  auto per_user = RunPlanned(a, /*capture=*/false);
  if (!per_user.ok()) return "a hoisted request fails: " + per_user.status().ToString();
  auto per_candidate = RunPlanned(b, /*capture=*/false);
  if (!per_candidate.ok()) return "a hoisted request fails: " + per_candidate.status().ToString();
  for (size_t o = 0; o < per_user->size(); ++o) {
    if (!OutputsAgree((*per_user)[o], (*per_candidate)[o], AgreementTolerance())) {
      const std::string& name = graph_.values[static_cast<size_t>(graph_.outputs[o])].name;
      return "output '" + name + "' changes when the user side runs once per user";
    }
  }
  return std::string();
}

}  // namespace rankd
