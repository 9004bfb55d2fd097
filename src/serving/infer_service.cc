#include "serving/infer_service.h"

#include <atomic>
#include <cstdio>
#include <exception>
#include <memory>

#include "common/log.h"

namespace rankd {
namespace {

uint64_t Micros(InferService::Clock::time_point a, InferService::Clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
}

// Runs one step of a request's path; a bug that throws fails that request, not the process.
template <typename Step>
Status Guarded(const Model& model, const char* step, Step&& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    LogError("model '" + model.name() + "': " + step + " failed: " + e.what());
    return Internal(std::string(step) + " failed: " + e.what());
  } catch (...) {
    LogError("model '" + model.name() + "': " + step + " failed");
    return Internal(std::string(step) + " failed");
  }
}

}  // namespace

void InferService::InferAsync(std::string_view name, int64_t version, Clock::time_point received, const Parse& parse,
                              Serialize serialize, Finish finish, bool run_here_when_idle) {
  Clock::time_point start = Clock::now();
  StatusOr<std::shared_ptr<const Model>> found = repository_.Get(name, version);
  if (!found.ok()) return finish(found.status());
  std::shared_ptr<const Model> model = std::move(*found);
  const uint64_t trace = tracer_ ? tracer_->Sample(model->name()) : 0;
  metrics_.AddInflight(1);
  auto fail = [this](const Model& m, const Status& s, const Finish& finish) {
    metrics_.AddInflight(-1);
    metrics_.RecordFailure(m.name(), m.version());
    if (LogVerboseOn(1)) {
      LogVerbose(
          1, "model '" + m.name() + "' version " + std::to_string(m.version()) + ": a request failed: " + s.ToString());
    }
    finish(s);
  };
  // Past its capacity a batched model refuses new requests: asked before the request is parsed, a
  // refusal costs no parse (with batching off, gRPC's call queue refuses calls unread likewise).
  if (Status admitted = model->Admission(); !admitted.ok()) return fail(*model, admitted, finish);
  auto request = std::make_shared<ParsedRequest>();
  Status s = Guarded(*model, "parsing the request", [&] {
    StatusOr<ParsedRequest> parsed = parse(*model);
    if (parsed.ok()) *request = std::move(*parsed);
    return parsed.status();
  });
  if (!s.ok()) return fail(*model, s, finish);
  Clock::time_point parsed = Clock::now();
  // The model outlives `done` (Model::InferAsync), which therefore holds it by reference: were
  // `done` to hold the last owner, the model would be destroyed on its own batcher's thread.
  const Model& m = *model;
  auto answered = std::make_shared<std::atomic<bool>>(false);
  InferDone done = [this, &m, request, received, start, parsed, serialize = std::move(serialize), finish, fail,
                    answered, trace](StatusOr<std::vector<InferOutput>> outputs, const InferStats& stats) {
    answered->store(true);
    Clock::time_point scored = Clock::now();
    Status s = outputs.status();
    if (s.ok()) {
      s = Guarded(m, "writing the response", [&] {
        serialize(m, request->request, *outputs);
        return Status::Ok();
      });
    }
    if (!s.ok()) return fail(m, s, finish);
    Clock::time_point written = Clock::now();
    RequestTiming t;
    t.queue_us = Micros(received, start) + stats.queue_us;
    t.execution = stats.execution;
    t.input_us = Micros(start, parsed);
    t.infer_us = Micros(parsed, scored);
    t.output_us = Micros(scored, written);
    t.total_us = Micros(received, written);
    t.rows = outputs->empty() ? 0 : outputs->front().data.dim(0);
    t.batch_rows = stats.batch_rows > 0 ? stats.batch_rows : t.rows;
    t.buckets = m.bucket_counters();
    metrics_.AddInflight(-1);
    metrics_.RecordSuccess(m.name(), m.version(), t);
    // Before the answer, so that a client that has it finds the trace file written.
    if (trace)
      tracer_->Record(trace, m.name(), m.version(), request->request, *outputs,
                      {received, start, parsed, scored, written});
    finish(Status::Ok());
  };
  s = Guarded(m, "scoring the request", [&] {
    m.InferAsync(request, std::move(done), run_here_when_idle);  // a frontend's thread
    return Status::Ok();
  });
  // A throw before the request was answered or queued: it fails here (after it was queued nothing
  // in InferAsync throws).
  if (!s.ok() && !answered->load()) fail(m, s, finish);
}

}  // namespace rankd
