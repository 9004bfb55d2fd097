#include "embedding/lookup_replay.h"

#include <algorithm>

#include "embedding/cache_policy.h"

namespace rankd {
namespace {

std::vector<int> ValuesOf(const std::vector<TableInfo>& tables) {
  std::vector<int> values;
  for (const TableInfo& t : tables) values.push_back(t.value);
  return values;
}

}  // namespace

LookupReplay::LookupReplay(const Graph& graph, std::vector<TableInfo> tables, int64_t sample_ids,
                           NodeEvaluator evaluate)
    : graph_(graph),
      tables_(std::move(tables)),
      sample_ids_(sample_ids),
      evaluate_(std::move(evaluate)),
      sampling_(PlanLookupSampling(graph, ValuesOf(tables_), static_cast<bool>(evaluate_))) {}

Status LookupReplay::Add(std::span<const Tensor> graph_inputs) {
  Status failed;
  auto trace = [&](std::span<const Tensor> inputs, std::vector<uint64_t>& to) {
    Status computing;
    const auto computed = evaluate_ ? ComputeIdValues(graph_, sampling_.computed, inputs, evaluate_, &computing)
                                    : std::unordered_map<int, Tensor>{};
    if (!computing.ok() && failed.ok()) failed = computing;
    AppendLookups(graph_, tables_, inputs, to, &computed);
  };
  const size_t from = all_.size();
  trace(graph_inputs, all_);
  // The keeper's offers are numbered from 0, one a run: the sample starts where the keeper's would.
  const std::vector<Tensor> sample = SampleLookupInputs(sampling_, graph_inputs, sample_ids_, all_ends_.size());
  const bool whole = std::all_of(sampling_.inputs.begin(), sampling_.inputs.end(), [&](size_t i) {
    return !sample[i].defined() || sample[i].rank() == 0 || sample[i].dim(0) == graph_inputs[i].dim(0);
  });
  if (whole) {  // every row sampled: the keeper sees every lookup just traced
    seen_.insert(seen_.end(), all_.begin() + static_cast<std::ptrdiff_t>(from), all_.end());
  } else {
    trace(sample, seen_);
  }
  all_ends_.push_back(all_.size());
  seen_ends_.push_back(seen_.size());
  return failed;
}

double LookupReplay::ServedHitRatio(int64_t capacity) const {
  if (all_.empty()) return 0;
  CachePolicyOptions options;
  options.capacity = capacity;
  options.record_changes = false;
  CachePolicy policy(options);
  uint64_t hits = 0;
  size_t all_at = 0, seen_at = 0;
  for (size_t r = 0; r < all_ends_.size(); ++r) {
    for (; all_at < all_ends_[r]; ++all_at) hits += policy.Contains(all_[all_at]) ? 1 : 0;
    for (; seen_at < seen_ends_[r]; ++seen_at) policy.Access(seen_[seen_at]);
  }
  return static_cast<double>(hits) / static_cast<double>(all_.size());
}

}  // namespace rankd
