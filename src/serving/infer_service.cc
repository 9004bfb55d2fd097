#include "serving/infer_service.h"

namespace rankd {
namespace {

uint64_t Micros(InferService::Clock::time_point a, InferService::Clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
}

}  // namespace

Status InferService::Infer(const std::string& name, int64_t version, Clock::time_point received, const Parse& parse,
                           const Serialize& serialize) {
  Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, repository_.Get(name, version));
  metrics_.AddInflight(1);
  auto request = parse(*model);
  Clock::time_point parsed = Clock::now();
  InferStats stats;
  StatusOr<std::vector<InferOutput>> outputs = request.ok() ? model->Infer(*request, &stats) : request.status();
  if (!outputs.ok()) {
    metrics_.AddInflight(-1);
    metrics_.RecordFailure(model->name(), model->version());
    return outputs.status();
  }
  Clock::time_point scored = Clock::now();
  serialize(*model, *request, *outputs);
  Clock::time_point done = Clock::now();
  RequestTiming t;
  t.queue_us = Micros(received, start) + stats.queue_us;
  t.execution = stats.execution;
  t.input_us = Micros(start, parsed);
  t.infer_us = Micros(parsed, scored);
  t.output_us = Micros(scored, done);
  t.total_us = Micros(received, done);
  t.rows = outputs->empty() ? 0 : outputs->front().data.dim(0);
  t.buckets = model->bucket_counters();
  metrics_.AddInflight(-1);
  metrics_.RecordSuccess(model->name(), model->version(), t);
  return Status::Ok();
}

}  // namespace rankd
