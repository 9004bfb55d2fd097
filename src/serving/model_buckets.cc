// Model: running requests padded to shape buckets, and capturing their plans (docs/buckets.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "common/host_allocator.h"
#include "runtime/op_profile.h"
#include "serving/model.h"

namespace rankd {
namespace {

// Bucket shapes remembered by PlanForBucket; past this many (length buckets multiply) it starts over.
constexpr size_t kMaxBucketMetas = 4096;

uint64_t MicrosSince(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
}

// The plan's view of `prepared`: each input's shape, and the graph's dtype (ids a request holds
// in 32 bits run on the same plans as 64-bit ones; Model::TakesIdsIn32Bits).
std::vector<TensorMeta> MetasOf(const PreparedRequest& prepared, const Graph& graph) {
  std::vector<TensorMeta> metas;
  for (size_t i = 0; i < prepared.inputs.size(); ++i) {
    metas.push_back({graph.values[static_cast<size_t>(graph.inputs[i])].dtype, prepared.inputs[i].shape(), nullptr});
  }
  return metas;
}

// Captures `plan` on `executor`, trying twice: a capture can fail for reasons outside it (a CUDA
// library synchronising on another thread), and a plan found uncapturable runs uncaptured for good.
StatusOr<int64_t> CaptureWithRetry(Executor& executor, const Plan& plan) {
  auto bytes = executor.Capture(plan);
  if (!bytes.ok() && bytes.status().code() == StatusCode::kInternal) bytes = executor.Capture(plan);
  return bytes;
}

}  // namespace

std::optional<BucketKey> Model::FindBucket(const PreparedRequest& prepared) const {
  const std::vector<bool>& scanned = buckets_->own_length_if_idless();
  if (std::none_of(scanned.begin(), scanned.end(), [](bool b) { return b; })) {
    return buckets_->Find(prepared.rows, prepared.ragged_max_lengths, prepared.users);
  }
  std::vector<bool> idless = RowsWithoutIds(prepared, input_kinds_, scanned);
  return buckets_->Find(prepared.rows, prepared.ragged_max_lengths, prepared.users, &idless);
}

StatusOr<std::vector<Tensor>> Model::RunPrepared(const PreparedRequest& prepared) const {
  RequestTensorScope request_tensors;  // the padded inputs and the outputs
  if (buckets_) {
    PhaseTimer finding("(bucket and plan found)");
    std::optional<BucketKey> key = FindBucket(prepared);
    if (key) {
      RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, PlanForBucket(*key));
      finding.Stop();
      PhaseTimer acquiring("(executor acquired)");
      RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, AcquireExecutor());
      acquiring.Stop();
      PhaseTimer padding("(padded to its bucket)");
      const bool ids_unpadded = executor->FillsRaggedTails();
      const bool fits = FitsBucket(prepared, *key, input_kinds_, ids_unpadded);  // W1 at 512 pairs: 53 views saved
      PreparedRequest padded = fits ? PreparedRequest{} : PadToBucket(prepared, *key, input_kinds_, ids_unpadded);
      padding.Stop();
      RANKD_ASSIGN_OR_RETURN(
          std::vector<Tensor> outputs,
          RunOn(plan, std::move(executor), fits ? prepared.inputs : padded.inputs, /*capture=*/true));
      real_rows_ += static_cast<uint64_t>(prepared.rows);
      padded_rows_ += static_cast<uint64_t>(key->rows);
      return TakeRows(std::move(outputs), prepared.rows);
    }
  }
  return RunPlanned(prepared, /*capture=*/false);  // past the largest bucket: its own shape, uncaptured
}

StatusOr<std::vector<Tensor>> Model::RunPlanned(const PreparedRequest& prepared, bool capture) const {
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan,
                         PlanFor(MetasOf(prepared, graph_), prepared.ragged_max_lengths));
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, AcquireExecutor());
  return RunOn(plan, std::move(executor), prepared.inputs, capture);
}

StatusOr<std::vector<Tensor>> Model::RunOn(const std::shared_ptr<const Plan>& plan, std::unique_ptr<Executor> executor,
                                           std::span<const Tensor> inputs, bool capture) const {
  bool captured = capture_ && executor->Captured(*plan);
  auto result = executor->Run(*plan, inputs);
  // A run whose staging buffers had to grow dropped the executor's captures, this plan's too.
  captured = captured && executor->Captured(*plan);
  PhaseTimer releasing("(executor released)");
  ReleaseExecutor(std::move(executor));
  releasing.Stop();
  if (capture_ && capture) {
    if (captured) {
      ++graph_hits_;
    } else {
      ++graph_misses_;
      // Queued unless already queued or found uncapturable; executors that have it are skipped,
      // those that lost it (their buffers grew) capture it again.
      bool uncapturable;
      {
        std::lock_guard<std::mutex> lock(mu_);
        uncapturable = uncapturable_.count(plan->id()) > 0;
      }
      if (!uncapturable) capture_worker_->Submit(plan->id(), [this, plan] { CaptureEverywhere(plan); });
    }
  }
  return result;
}

bool Model::MergeNow(const std::vector<const PreparedRequest*>& parts) const {
  if (!capture_) return true;
  const PreparedRequest merged = MergedSizes(parts);
  const std::vector<bool> idless = RowsWithoutIds(parts, input_kinds_, buckets_->own_length_if_idless());
  std::optional<BucketKey> key = buckets_->Find(merged.rows, merged.ragged_max_lengths, merged.users, &idless);
  if (!key) return true;            // past the largest bucket: launches are a small part of such a batch
  auto plan = PlanForBucket(*key);  // the plan the merged batch would run
  if (!plan.ok()) return true;      // which reports the error
  switch (merge_gate_.Decide((*plan)->id())) {
    case MergeGate::Verdict::kMerge:
      return true;
    case MergeGate::Verdict::kSplitAndCapture: {
      bool uncapturable;
      {
        std::lock_guard<std::mutex> lock(mu_);
        uncapturable = uncapturable_.count((*plan)->id()) > 0;
      }
      std::shared_ptr<const Plan> wanted = *plan;
      if (!uncapturable) capture_worker_->Submit(wanted->id(), [this, wanted] { CaptureEverywhere(wanted); });
      break;
    }
    case MergeGate::Verdict::kSplit:
      break;
  }
  ++merges_deferred_;
  return false;
}

void Model::CaptureEverywhere(const std::shared_ptr<const Plan>& plan) const {
  for (const Executor* e : executors_->All()) {
    std::unique_ptr<Executor> executor = executors_->Take(e);
    if (!executor->Captured(*plan)) {
      auto start = std::chrono::steady_clock::now();
      auto bytes = CaptureWithRetry(*executor, *plan);
      if (bytes.ok()) {
        ++captures_;
        capture_us_ += MicrosSince(start);
      } else {
        ++capture_failures_;
        std::fprintf(stderr, "model '%s': capturing a plan failed (it runs uncaptured): %s\n", name().c_str(),
                     bytes.status().ToString().c_str());
        {
          std::lock_guard<std::mutex> lock(mu_);
          uncapturable_.insert(plan->id());
        }
        ReleaseExecutor(std::move(executor));
        return;
      }
    }
    ReleaseExecutor(std::move(executor));
  }
  merge_gate_.Captured(plan->id());
}

StatusOr<std::shared_ptr<const Plan>> Model::PlanForRequest(const InferRequest& request) const {
  PreparedRequest prepared;
  RANKD_RETURN_IF_ERROR(BuildGraphInputs(request, prepared));
  if (buckets_) {
    if (std::optional<BucketKey> key = FindBucket(prepared)) {
      prepared = PadToBucket(prepared, *key, input_kinds_);
    }
  }
  return PlanFor(MetasOf(prepared, graph_), prepared.ragged_max_lengths);
}

StatusOr<std::shared_ptr<const Plan>> Model::PlanForBucket(const BucketKey& key) const {
  std::vector<int64_t> numbers = key.Numbers();
  std::optional<std::vector<TensorMeta>> metas;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = bucket_plans_.find(numbers); it != bucket_plans_.end()) {
      if (std::shared_ptr<const Plan> plan = it->second.plan.lock()) return plan;
      metas = it->second.metas;
    }
  }
  if (!metas) {                               // the shapes of a one-row example padded to the bucket, once per bucket
    InferRequest one = ExampleRequest(1, 0);  // rows without ids fit every length, 0 included
    PreparedRequest smallest;
    RANKD_RETURN_IF_ERROR(BuildGraphInputs(one, smallest));
    metas = MetasOf(PadToBucket(smallest, key, input_kinds_), graph_);
  }
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, PlanFor(*metas, key.lengths));
  std::lock_guard<std::mutex> lock(mu_);
  if (bucket_plans_.size() >= kMaxBucketMetas && !bucket_plans_.count(numbers)) bucket_plans_.clear();
  bucket_plans_[std::move(numbers)] = {std::move(*metas), plan};
  return plan;
}

size_t Model::NumbersHash::operator()(const std::vector<int64_t>& v) const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the numbers
  for (int64_t x : v) h = (h ^ static_cast<uint64_t>(x)) * 0x100000001b3ull;
  return static_cast<size_t>(h);
}

StatusOr<Executor::Launches> Model::CountLaunches(const Plan& plan) const {
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, AcquireExecutor());
  auto launches = executor->CountLaunches(plan);
  ReleaseExecutor(std::move(executor));
  return launches;
}

void Model::WaitForCaptures() const {
  if (capture_worker_) capture_worker_->Drain();
}

BucketCounters Model::bucket_counters() const {
  return {graph_hits_.load(), graph_misses_.load(), captures_.load(),    capture_failures_.load(),
          capture_us_.load(), real_rows_.load(),    padded_rows_.load(), merges_deferred_.load()};
}

Status Model::StartBuckets() {
  if (options_.shape_buckets >= 0) config_.buckets.enabled = options_.shape_buckets;
  const ShapeBucketsConfig& c = config_.buckets;
  bool on_device = backend_->device_kind() != DeviceKind::kHost;
  bool explicit_on = c.enabled == 1;
  if (c.enabled == 0 || (c.enabled < 0 && !on_device)) {
    report_.buckets = c.enabled == 0 ? "off (config)" : "off (the CPU's default)";
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
  std::vector<bool> read_padded(ragged_names_.size(), false);
  for (const Node& node : graph_.nodes) {
    if (node.op == "RaggedToPadded") read_padded[static_cast<size_t>(node.GetInt("ragged_index", 0))] = true;
  }
  std::vector<std::vector<int64_t>> lengths;
  for (size_t k = 0; k < ragged_names_.size(); ++k) {
    int64_t max_length = config_.FindInput(ragged_names_[k])->max_length;
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
    auto exact = RunPlanned(p, /*capture=*/false);
    if (!exact.ok()) return std::string();
    auto run = RunPlanned(PadToBucket(p, key, input_kinds_), /*capture=*/false);
    if (!run.ok()) return "a padded request fails (" + key.ToString() + "): " + run.status().ToString();
    std::vector<Tensor> padded = TakeRows(std::move(*run), p.rows);
    for (size_t o = 0; o < exact->size(); ++o) {
      if (!OutputsAgree((*exact)[o], padded[o], AgreementTolerance())) {
        return "output '" + output_names_[o] + "' changes when a request is padded (" + key.ToString() + ")";
      }
    }
    return std::string();
  };
  std::string lengths_change;
  // The checks pad more than any bucket would: 2 more rows, and every bucketed length to its
  // longest.
  auto widest = [&](const PreparedRequest& p) {
    BucketKey key{p.rows + 2, p.ragged_max_lengths, hoisted_ ? p.users + 1 : 0};
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
  buckets_ =
      std::make_unique<ShapeBuckets>(rows, lengths, hoisted_ ? rows : std::vector<int64_t>{}, own_length_if_idless);
  report_.buckets = lengths_change.empty() ? "on"
                    : idless_only          ? "on, sequences at their own length when a row has no id: " + lengths_change
                                           : "on, sequences at their own length: " + lengths_change;
  if (!on_device || !c.cuda_graphs) return Status::Ok();
  capture_worker_ = std::make_unique<CaptureWorker>();
  capture_ = true;
  return CaptureWarmupBuckets(max_lengths);
}

Status Model::CaptureWarmupBuckets(const std::vector<int64_t>& max_lengths) {
  const ShapeBucketsConfig& c = config_.buckets;
  // Every executor exists and has every warm-up bucket captured before the model is ready.
  warmup_keys_ = buckets_->WarmupKeys(c.warmup_max_batch_size, max_lengths);
  const std::vector<BucketKey>& keys = warmup_keys_;
  options_.max_plans = std::max(options_.max_plans, keys.size() + 64);
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
  std::vector<std::unique_ptr<Executor>> held;
  for (int i = 0; i < std::max(max_executors_, 1); ++i) {
    RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, AcquireExecutor());
    held.push_back(std::move(e));
  }
  auto start = std::chrono::steady_clock::now();
  Status failed = Status::Ok();
  int64_t workspace = plans.empty() ? 0 : plans.front()->workspace_bytes();
  for (auto& executor : held) {
    for (const auto& plan : plans) {
      if (workspace + report_.warmup_capture_bytes / std::max(max_executors_, 1) > limit) break;
      auto bytes = CaptureWithRetry(*executor, *plan);
      if (!bytes.ok()) {
        failed = bytes.status();
        break;
      }
      ++report_.warmup_captures;
      report_.warmup_capture_bytes += *bytes;
    }
    if (!failed.ok()) break;
  }
  for (auto& executor : held) ReleaseExecutor(std::move(executor));
  report_.warmup_capture_ms = static_cast<double>(MicrosSince(start)) / 1000.0;
  captures_ += static_cast<uint64_t>(report_.warmup_captures);
  capture_us_ += MicrosSince(start);
  if (!failed.ok()) {
    capture_ = false;
    report_.buckets = "on, graphs off: " + failed.ToString();
  }
  return Status::Ok();
}

}  // namespace rankd
