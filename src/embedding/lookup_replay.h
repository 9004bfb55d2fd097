// Requests' lookups replayed for the cache simulator (rankd inspect --requests sizes a cache with
// it; tests/live_hit_ratio_test.cc holds the server's keeper to it): every lookup of each request
// in order, and the ones the server's cache keeper would see of it (lookup_sample.h). A keeper
// that samples counts and ages its policy in sampled lookups, so its cache hits less than a
// policy that sees every lookup; ServedHitRatio predicts what it hits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "embedding/lookup_sample.h"
#include "embedding/lookup_trace.h"
#include "embedding/table_budget.h"
#include "model/graph.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

class LookupReplay {
 public:
  // Lookups of `tables` (FindTables(graph): RowKey's table index) read by `graph`, sampled as a
  // keeper of all of them that copies at most `sample_ids` ids a request (CacheKeeperOptions); with
  // `evaluate`, ids the graph computes from inputs are traced too.
  LookupReplay(const Graph& graph, std::vector<TableInfo> tables, int64_t sample_ids, NodeEvaluator evaluate = {});

  // One request's graph inputs (graph order). Ids a lookup computes that could not be computed are
  // not traced; the first such failure is returned.
  Status Add(std::span<const Tensor> graph_inputs);

  // Every lookup so far, RowKeys in order (what Belady's optimum and the static oracle are
  // computed on), and those the keeper would have seen.
  const std::vector<uint64_t>& all() const { return all_; }
  const std::vector<uint64_t>& seen() const { return seen_; }
  size_t requests() const { return all_ends_.size(); }

  // The hit ratio over every lookup of a cache of `capacity` rows chosen by a CachePolicy fed the
  // seen lookups, request after request: a request's lookups find what the policy held before it,
  // as a device's lookups find the rows the keeper had moved in before their run.
  double ServedHitRatio(int64_t capacity) const;

 private:
  const Graph& graph_;
  const std::vector<TableInfo> tables_;
  const int64_t sample_ids_;
  const NodeEvaluator evaluate_;
  const LookupSampling sampling_;
  std::vector<uint64_t> all_, seen_;
  std::vector<size_t> all_ends_, seen_ends_;  // per request: where its lookups end in all_ and seen_
};

}  // namespace rankd
