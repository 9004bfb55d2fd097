#include "serving/infer_service.h"

#include <cstdio>
#include <exception>

namespace rankd {
namespace {

uint64_t Micros(InferService::Clock::time_point a, InferService::Clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
}

}  // namespace

Status InferService::Infer(const std::string& name, int64_t version, Clock::time_point received, const Parse& parse,
                           const Serialize& serialize) {
  Clock::time_point start = Clock::now();
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, repository_.Get(name, version));
  metrics_.AddInflight(1);
  auto fail = [&](Status s) {
    metrics_.AddInflight(-1);
    metrics_.RecordFailure(model->name(), model->version());
    return s;
  };
  // A bug that throws in one request's path fails that request, not the process.
  auto guarded = [&](const char* step, auto&& run) -> Status {
    try {
      return run();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "model '%s': %s failed: %s\n", model->name().c_str(), step, e.what());
      return Internal(std::string(step) + " failed: " + e.what());
    } catch (...) {
      std::fprintf(stderr, "model '%s': %s failed\n", model->name().c_str(), step);
      return Internal(std::string(step) + " failed");
    }
  };
  StatusOr<ParsedRequest> request = Internal("not parsed");
  Status s = guarded("parsing the request", [&] {
    request = parse(*model);
    return request.status();
  });
  if (!s.ok()) return fail(s);
  Clock::time_point parsed = Clock::now();
  InferStats stats;
  StatusOr<std::vector<InferOutput>> outputs = Internal("not scored");
  s = guarded("scoring the request", [&] {
    outputs = model->Infer(request->request, request->length_sums, &stats);
    return outputs.status();
  });
  if (!s.ok()) return fail(s);
  Clock::time_point scored = Clock::now();
  s = guarded("writing the response", [&] {
    serialize(*model, request->request, *outputs);
    return Status::Ok();
  });
  if (!s.ok()) return fail(s);
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
