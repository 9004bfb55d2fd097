// Model: running requests padded to shape buckets, and capturing their plans (docs/buckets.md).
#include <algorithm>
#include <optional>

#include "common/host_allocator.h"
#include "common/mutex.h"
#include "runtime/op_profile.h"
#include "serving/model.h"

namespace rankd {
namespace {

// Bucket shapes remembered by PlanForBucket; past this many (length buckets multiply) it starts over.
constexpr size_t kMaxBucketMetas = 4096;

}  // namespace

std::optional<BucketKey> Model::FindBucket(const PreparedRequest& prepared) const {
  const std::vector<bool>& scanned = buckets_->own_length_if_idless();
  if (std::none_of(scanned.begin(), scanned.end(), [](bool b) { return b; })) {
    return buckets_->Find(prepared.rows, prepared.ragged_max_lengths, prepared.users);
  }
  std::vector<bool> idless = RowsWithoutIds(prepared, compiled_->input_kinds(), scanned);
  return buckets_->Find(prepared.rows, prepared.ragged_max_lengths, prepared.users, &idless);
}

bool Model::DefersMerges() const {
  if (!buckets_ || backend().device_kind() == DeviceKind::kHost || cpu_route_ || runner_->cache_keeper() ||
      runner_->disk_tables()) {
    return false;
  }
  const std::vector<bool>& scanned = buckets_->own_length_if_idless();
  return std::none_of(scanned.begin(), scanned.end(), [](bool b) { return b; });
}

StatusOr<std::vector<Tensor>> Model::RunPrepared(const PreparedRequest& prepared) const {
  // Inputs a merged batch left unwritten (DefersMerges) are gathered by the executor from their
  // parts; every other path reads them on the host, written first.
  DeferredMerge* deferred = prepared.deferred.get();
  if (const int parts = RowSplitParts(row_split_, prepared.rows); parts > 1) {
    if (deferred) deferred->WriteRest();
    return RunRowSplit(prepared, parts);
  }
  RequestTensorScope request_tensors;  // the padded inputs and the outputs
  if (buckets_) {
    PhaseTimer finding("(bucket and plan found)");
    std::optional<BucketKey> key = FindBucket(prepared);
    if (key) {
      RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, PlanForBucket(*key));
      finding.Stop();
      // With tables on disk the executor is taken once their rows are staged (milliseconds of host
      // work), and the ids are padded here (the staging copies them anyway): an executor that fills
      // ragged tails is not asked for first.
      const bool on_disk = runner_->disk_tables() != nullptr;
      std::unique_ptr<Executor> executor;
      if (!on_disk) {
        PhaseTimer acquiring("(executor acquired)");
        RANKD_ASSIGN_OR_RETURN(executor, runner_->Acquire(prepared.deadline));
      }
      PhaseTimer padding("(padded to its bucket)");
      const bool ids_unpadded = executor && executor->FillsRaggedTails();
      if (deferred && !ids_unpadded) deferred->WriteRest();  // PadToBucket copies the ids
      const bool fits =
          FitsBucket(prepared, *key, compiled_->input_kinds(), ids_unpadded);  // W1 at 512 pairs: 53 views saved
      PreparedRequest padded =
          fits ? PreparedRequest{} : PadToBucket(prepared, *key, compiled_->input_kinds(), ids_unpadded);
      padding.Stop();
      const std::span<const Tensor> inputs = fits ? prepared.inputs : padded.inputs;
      RANKD_ASSIGN_OR_RETURN(StagedRun staged, runner_->StageDiskRows(*plan, inputs));
      if (on_disk) {
        PhaseTimer acquiring_late("(executor acquired)");
        RANKD_ASSIGN_OR_RETURN(executor, runner_->Acquire(prepared.deadline));
      }
      // The executor writes the request's own rows, not the padding's.
      std::vector<Tensor> outputs = Executor::OutputsFor(*plan, key->rows, prepared.rows);
      RANKD_RETURN_IF_ERROR(runner_->RunOn(plan, std::move(executor), staged.inputs.empty() ? inputs : staged.inputs,
                                           outputs,
                                           /*capture=*/true, deferred));
      real_rows_ += static_cast<uint64_t>(prepared.rows);
      padded_rows_ += static_cast<uint64_t>(key->rows);
      return outputs;
    }
  }
  if (deferred) deferred->WriteRest();
  return RunPlanned(prepared);  // past the largest bucket: its own shape, uncaptured
}

StatusOr<std::vector<Tensor>> Model::RunPlanned(const PreparedRequest& prepared) const {
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan,
                         PlanFor(MetasOf(prepared, graph()), prepared.ragged_max_lengths));
  return runner_->Run(plan, prepared.inputs, /*capture=*/false, prepared.deadline);
}

bool Model::MergeNow(const std::vector<const PreparedRequest*>& parts) const {
  if (!runner_->capturing()) return true;
  const PreparedRequest merged = MergedSizes(parts);
  const std::vector<bool> idless = RowsWithoutIds(parts, compiled_->input_kinds(), buckets_->own_length_if_idless());
  std::optional<BucketKey> key = buckets_->Find(merged.rows, merged.ragged_max_lengths, merged.users, &idless);
  if (!key) return true;            // past the largest bucket: launches are a small part of such a batch
  auto plan = PlanForBucket(*key);  // the plan the merged batch would run
  if (!plan.ok()) return true;      // which reports the error
  switch (merge_gate_.Decide((*plan)->id())) {
    case MergeGate::Verdict::kMerge:
      return true;
    case MergeGate::Verdict::kSplitAndCapture:
      runner_->QueueCapture(*plan);
      break;
    case MergeGate::Verdict::kSplit:
      break;
  }
  ++merges_deferred_;
  return false;
}

StatusOr<std::shared_ptr<const Plan>> Model::PlanForRequest(const InferRequest& request) const {
  PreparedRequest prepared;
  RANKD_RETURN_IF_ERROR(BuildGraphInputs(request, prepared));
  if (buckets_) {
    if (std::optional<BucketKey> key = FindBucket(prepared)) {
      prepared = PadToBucket(prepared, *key, compiled_->input_kinds());
    }
  }
  return PlanFor(MetasOf(prepared, graph()), prepared.ragged_max_lengths);
}

StatusOr<std::shared_ptr<const Plan>> Model::PlanForBucket(const BucketKey& key) const {
  std::vector<int64_t> numbers = key.Numbers();
  std::optional<std::vector<TensorMeta>> metas;
  {
    MutexLock lock(mu_);
    if (auto it = bucket_plans_.find(numbers); it != bucket_plans_.end()) {
      if (std::shared_ptr<const Plan> plan = it->second.plan.lock()) return plan;
      metas = it->second.metas;
    }
  }
  if (!metas) {                               // the shapes of a one-row example padded to the bucket, once per bucket
    InferRequest one = ExampleRequest(1, 0);  // rows without ids fit every length, 0 included
    PreparedRequest smallest;
    RANKD_RETURN_IF_ERROR(BuildGraphInputs(one, smallest));
    metas = MetasOf(PadToBucket(smallest, key, compiled_->input_kinds()), graph());
  }
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, PlanFor(*metas, key.lengths));
  MutexLock lock(mu_);
  if (bucket_plans_.size() >= kMaxBucketMetas && !bucket_plans_.count(numbers)) bucket_plans_.clear();
  bucket_plans_[std::move(numbers)] = {std::move(*metas), plan};
  return plan;
}

size_t Model::NumbersHash::operator()(const std::vector<int64_t>& v) const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the numbers
  for (int64_t x : v) h = (h ^ static_cast<uint64_t>(x)) * 0x100000001b3ull;
  return static_cast<size_t>(h);
}

StatusOr<Executor::Launches> Model::CountLaunches(const Plan& plan) const { return runner_->CountLaunches(plan); }

void Model::WaitForCaptures() const { runner_->WaitForCaptures(); }

BucketCounters Model::bucket_counters() const {
  return {runner_->counters(), real_rows_.load(), padded_rows_.load(), merges_deferred_.load()};
}

Status Model::StartBuckets() {
  if (options_.shape_buckets >= 0) config_.buckets.enabled = options_.shape_buckets;
  const ShapeBucketsConfig& c = config_.buckets;
  bool on_device = backend().device_kind() != DeviceKind::kHost;
  bool explicit_on = c.enabled == 1;
  if (c.enabled == 0 || (c.enabled < 0 && !on_device)) {
    report_.buckets = c.enabled == 0 ? "off (config)" : "off (the CPU's default)";
    return Status::Ok();
  }
  // A bucket is keyed by rows and ragged lengths: an input whose other dims requests may change
  // (padded [rows, -1] ids not declared ragged) would find a plan made for another width.
  for (const InputSignature& in : inputs()) {
    if (in.ragged || std::none_of(in.dims.begin(), in.dims.end(), [](int64_t d) { return d < 0; })) continue;
    const std::string why = "input '" + in.name + "' has a dimension past its rows that requests may change";
    if (explicit_on) return InvalidArgument("shape buckets: " + why + "; remove the buckets section or fix its dims");
    report_.buckets = "off: " + why;
    return Status::Ok();
  }
  int64_t row_limit = config_.max_batch_size > 0 ? config_.max_batch_size : options_.max_rows;
  row_limit = std::max(row_limit, config_.batching.max_batch_size);
  // Past 1,024 rows launches are a small part of a batch's time, and padding would cost more than
  // a graph saves: larger requests run at their own shape unless the config lists larger sizes.
  std::vector<int64_t> rows = c.allowed_batch_sizes.empty()
                                  ? ShapeBuckets::Geometric(std::min<int64_t>(row_limit, 1024))
                                  : c.allowed_batch_sizes;
  // Lengths per ragged input. One only embedding bags read (no padded copy) is padded to its
  // max_length when that is short (multi-hot features), so its length never splits a bucket.
  std::vector<int64_t> max_lengths;
  const std::vector<std::string>& ragged_names = compiled_->ragged_names();
  std::vector<bool> read_padded(ragged_names.size(), false);
  for (const Node& node : graph().nodes) {
    if (node.op == "RaggedToPadded") read_padded[static_cast<size_t>(node.GetInt("ragged_index", 0))] = true;
  }
  std::vector<std::vector<int64_t>> lengths;
  for (size_t k = 0; k < ragged_names.size(); ++k) {
    int64_t max_length = config_.FindInput(ragged_names[k])->max_length;
    max_lengths.push_back(max_length);
    lengths.push_back(!read_padded[k] && max_length <= 128
                          ? std::vector<int64_t>{max_length}
                          : ShapeBuckets::AllowedLengths(c.allowed_lengths, max_length));
  }

  // Padding must change nothing: requests of 3 rows with rows of 3 ids and of none, alone and
  // padded (rows only, then rows and lengths). A model whose padded sequences change its scores
  // (a fully masked softmax, say) keeps those sequences at the request's own length.
  std::vector<PreparedRequest> examples(2);
  std::vector<InferRequest> requests = {ExampleRequest(3, 3), ExampleRequest(3, 0)};
  for (size_t e = 0; e < examples.size(); ++e) {
    RandomizeFloats(requests[e], 2024 + static_cast<uint32_t>(e));
    RANKD_RETURN_IF_ERROR(BuildGraphInputs(requests[e], examples[e]));
  }
  // The first output padding to `key` changes, or "". An example the model cannot score at its
  // own shape (a graph that refuses empty sequences, say) proves nothing and is skipped.
  auto changed = [&](const PreparedRequest& p, const BucketKey& key) -> std::string {
    auto exact = RunPlanned(p);
    if (!exact.ok()) return std::string();
    auto run = RunPlanned(PadToBucket(p, key, compiled_->input_kinds()));
    if (!run.ok()) return "a padded request fails (" + key.ToString() + "): " + run.status().ToString();
    std::vector<Tensor> padded = TakeRows(std::move(*run), p.rows);
    for (size_t o = 0; o < exact->size(); ++o) {
      if (!OutputsAgree((*exact)[o], padded[o], AgreementTolerance())) {
        return "output '" + compiled_->output_names()[o] + "' changes when a request is padded (" + key.ToString() +
               ")";
      }
    }
    return std::string();
  };
  std::string lengths_change;
  // The checks pad more than any bucket would: 2 more rows, and every bucketed length to its
  // longest.
  auto widest = [&](const PreparedRequest& p) {
    BucketKey key{p.rows + 2, p.ragged_max_lengths, compiled_->hoisted() ? p.users + 1 : 0};
    for (size_t k = 0; k < lengths.size(); ++k) {
      if (!lengths[k].empty()) key.lengths[k] = lengths[k].back();
    }
    return key;
  };
  for (const PreparedRequest& p : examples) {
    BucketKey key = widest(p);
    std::string why = changed(p, BucketKey{key.rows, p.ragged_max_lengths, key.users});  // rows only
    if (!why.empty()) {
      why += ": the graph mixes rows";
      if (explicit_on) return InvalidArgument(why + "; remove the buckets section");
      report_.buckets = "off: " + why;
      return Status::Ok();
    }
    if (lengths_change.empty()) lengths_change = changed(p, key);
  }
  // Padded sequences change the scores: those inputs keep the request's own longest row. If only
  // rows without ids make the difference (a fully masked softmax averages over the padded width),
  // only requests with such a row do, and the others are bucketed.
  std::vector<bool> own_length_if_idless(lengths.size(), false);
  bool idless_only = false;
  if (!lengths_change.empty()) {
    for (const PreparedRequest& p : examples) {  // at their own length, the rest padded
      BucketKey key = widest(p);
      for (size_t k = 0; k < lengths.size(); ++k) {
        if (read_padded[k]) key.lengths[k] = p.ragged_max_lengths[k];
      }
      std::string why = changed(p, key);
      if (!why.empty()) {
        if (explicit_on) return InvalidArgument(why + "; remove the buckets section");
        report_.buckets = "off: " + why;
        return Status::Ok();
      }
    }
    std::vector<InferRequest> with_ids = {ExampleRequest(3, 3), ExampleRequest(3, 1)};  // every row has ids
    idless_only = true;
    for (size_t e = 0; e < with_ids.size() && idless_only; ++e) {
      RandomizeFloats(with_ids[e], 2030 + static_cast<uint32_t>(e));
      PreparedRequest p;
      RANKD_RETURN_IF_ERROR(BuildGraphInputs(with_ids[e], p));
      idless_only = changed(p, widest(p)).empty();
    }
    for (size_t k = 0; k < lengths.size(); ++k) {
      if (!read_padded[k]) continue;
      if (idless_only) {
        own_length_if_idless[k] = true;
      } else {
        lengths[k].clear();
      }
    }
  }
  // A hoisted model's user rows are padded too: to one of the row sizes (one user, unbatched).
  buckets_ = std::make_unique<ShapeBuckets>(rows, lengths, compiled_->hoisted() ? rows : std::vector<int64_t>{},
                                            own_length_if_idless);
  report_.buckets = lengths_change.empty() ? "on"
                    : idless_only          ? "on, sequences at their own length when a row has no id: " + lengths_change
                                           : "on, sequences at their own length: " + lengths_change;
  if (!on_device || !c.cuda_graphs) return Status::Ok();
  runner_->StartCapturing([this](uint64_t plan) { merge_gate_.Captured(plan); });
  return CaptureWarmupBuckets(max_lengths);
}

Status Model::CaptureWarmupBuckets(const std::vector<int64_t>& max_lengths) {
  const ShapeBucketsConfig& c = config_.buckets;
  // Every executor exists and has every warm-up bucket captured before the model is ready.
  warmup_keys_ = buckets_->WarmupKeys(c.warmup_max_batch_size, max_lengths);
  const std::vector<BucketKey>& keys = warmup_keys_;
  compiled_->KeepPlans(keys.size() + 64);
  // Each executor's memory for its captures is its workspace (as large as the largest captured
  // plan's) plus the graphs: buckets whose workspace alone passes the limit wait for first use.
  int64_t limit = c.max_graph_memory_mb << 20;
  std::vector<std::shared_ptr<const Plan>> plans;
  for (const BucketKey& k : keys) {
    auto plan = PlanForBucket(k);
    if (!plan.ok() && plan.status().code() != StatusCode::kResourceExhausted) return plan.status();
    if (plan.ok() && (*plan)->workspace_bytes() <= limit) plans.push_back(std::move(*plan));
  }
  // Largest workspace first, so each executor's buffers grow once and no capture is dropped.
  std::stable_sort(plans.begin(), plans.end(),
                   [](const auto& a, const auto& b) { return a->workspace_bytes() > b->workspace_bytes(); });
  WarmupCaptures done = runner_->CaptureOnEveryExecutor(plans, limit);
  report_.warmup_captures = done.count;
  report_.warmup_capture_bytes = done.bytes;
  report_.warmup_capture_ms = done.ms;
  if (!done.status.ok()) {
    runner_->StopCapturing();
    report_.buckets = "on, graphs off: " + done.status.ToString();
  }
  return Status::Ok();
}

}  // namespace rankd
