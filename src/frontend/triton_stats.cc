#include "frontend/triton_stats.h"

namespace rankd {
namespace {

void SetDuration(inference::StatisticDuration* d, uint64_t count, uint64_t us) {
  d->set_count(count);
  d->set_ns(us * 1000);
}

}  // namespace

StatusOr<inference::ModelStatisticsResponse> TritonStatistics(const ModelRepository& repository, const Metrics& metrics,
                                                              const std::string& name, int64_t version) {
  if (!name.empty()) RANKD_RETURN_IF_ERROR(repository.Get(name, version).status());  // NotFound names it
  inference::ModelStatisticsResponse out;
  for (const RepositoryIndexEntry& e : repository.Index()) {
    if (e.state != "READY" || e.version < 0) continue;
    if (!name.empty() && (e.name != name || (version >= 0 && e.version != version))) continue;
    const ModelCounts c = metrics.Counts(e.name, e.version);
    inference::ModelStatistics* s = out.add_model_stats();
    s->set_name(e.name);
    s->set_version(std::to_string(e.version));
    s->set_last_inference(c.last_unix_ms);
    s->set_inference_count(c.rows);
    s->set_execution_count(c.execs);
    inference::InferStatistics* i = s->mutable_inference_stats();
    SetDuration(i->mutable_success(), c.success, c.request_us);
    SetDuration(i->mutable_fail(), c.failure, 0);
    SetDuration(i->mutable_queue(), c.success, c.queue_us);
    SetDuration(i->mutable_compute_input(), c.success, c.input_us);
    SetDuration(i->mutable_compute_infer(), c.success, c.infer_us);
    SetDuration(i->mutable_compute_output(), c.success, c.output_us);
    SetDuration(i->mutable_cache_hit(), 0, 0);
    SetDuration(i->mutable_cache_miss(), 0, 0);
    for (const auto& [rows, b] : c.batches) {
      inference::InferBatchStatistics* bs = s->add_batch_stats();
      bs->set_batch_size(static_cast<uint64_t>(rows));
      SetDuration(bs->mutable_compute_input(), b.count, b.input_us);
      SetDuration(bs->mutable_compute_infer(), b.count, b.infer_us);
      SetDuration(bs->mutable_compute_output(), b.count, b.output_us);
    }
  }
  return out;
}

}  // namespace rankd
