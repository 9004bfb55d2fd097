#include "batching/batcher.h"

#include <algorithm>

namespace rankd {

Batcher::Batcher(BatcherOptions options, RunBatch run_batch)
    : options_(std::move(options)), run_batch_(std::move(run_batch)) {
  for (int i = 0; i < std::max(1, options_.executors); ++i) threads_.emplace_back([this] { ExecutorLoop(); });
}

Batcher::~Batcher() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& t : threads_) t.join();
}

Status Batcher::Enqueue(std::unique_ptr<BatchTask>& task, bool run_here_when_idle) {
  {
    MutexLock lock(mu_);
    if (stopping_) return Unavailable("the model is shutting down");
    if (queue_.size() >= options_.policy.max_enqueued) {
      return Unavailable("the queue is full (" + std::to_string(queue_.size()) + " requests); retry later");
    }
    const auto bound = options_.policy.max_queue_wait;
    if (bound.count() > 0 && !queue_.empty()) {
      const auto waited =
          std::chrono::duration_cast<std::chrono::microseconds>(options_.now() - queue_.front()->info.enqueued);
      if (waited > bound) {
        return Unavailable("the queue is behind: its oldest request has waited " +
                           std::to_string(waited.count() / 1000) + " ms, more than the " +
                           std::to_string(bound.count() / 1000) +
                           " ms max_queue_wait_microseconds allows; retry later");
      }
    }
    if (run_here_when_idle && queue_.empty() && busy_ == 0) {
      // Run at once, it never waits in the queue, which is what a deadline bounds.
      QueuedRequest info = task->info;
      info.deadline = BatchClock::time_point::max();
      BatchDecision d = DecideBatch({info}, options_.now(), options_.executors, 0, options_.policy);
      if (d.kind == BatchDecision::Kind::kDispatch && d.count == 1) {
        ++busy_;
        ++ran_on_caller_;
        lock.Unlock();
        // The executor is given back however the run ends (a throw goes on to the caller).
        struct GiveBack {
          Batcher& b;
          ~GiveBack() {
            {
              MutexLock relock(b.mu_);
              --b.busy_;
            }
            b.changed_.notify_all();  // an executor is free for what queued meanwhile
          }
        } give_back{*this};
        std::vector<std::unique_ptr<BatchTask>> batch;
        batch.push_back(std::move(task));
        run_batch_(std::move(batch));
        return Status::Ok();
      }
    }
    // Behind every task of equal or higher priority: arrival order within a priority.
    auto pos = std::find_if(queue_.begin(), queue_.end(), [&](const std::unique_ptr<BatchTask>& q) {
      return q->info.priority < task->info.priority;
    });
    queue_.insert(pos, std::move(task));
  }
  changed_.notify_one();
  return Status::Ok();
}

uint64_t Batcher::ran_on_caller() const {
  MutexLock lock(mu_);
  return ran_on_caller_;
}

size_t Batcher::queued() const {
  MutexLock lock(mu_);
  return queue_.size();
}

void Batcher::ExecutorLoop() {
  MutexLock lock(mu_);
  while (true) {
    std::vector<QueuedRequest> infos;
    infos.reserve(queue_.size());
    for (const auto& t : queue_) infos.push_back(t->info);
    int free = options_.executors - busy_;
    BatchDecision d = DecideBatch(infos, options_.now(), free, busy_, options_.policy);
    if (stopping_ && d.kind != BatchDecision::Kind::kIdle) {  // drain: run what is queued now
      d.kind = BatchDecision::Kind::kDispatch;
      if (d.count == 0) d.count = infos.size() - d.expired.size();
    }
    std::vector<std::unique_ptr<BatchTask>> expired, batch;
    for (size_t k = d.expired.size(); k-- > 0;) {
      expired.push_back(std::move(queue_[d.expired[k]]));
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(d.expired[k]));
    }
    if (d.kind == BatchDecision::Kind::kDispatch && d.count > 0) {
      batch.assign(std::make_move_iterator(queue_.begin()),
                   std::make_move_iterator(queue_.begin() + static_cast<std::ptrdiff_t>(d.count)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(d.count));
      ++busy_;
    }
    if (!expired.empty() || !batch.empty()) {
      lock.Unlock();
      for (auto& t : expired) t->Fail(DeadlineExceeded("the request's deadline passed while it was queued"));
      if (!batch.empty()) run_batch_(std::move(batch));
      lock.Lock();
      if (d.kind == BatchDecision::Kind::kDispatch && d.count > 0) --busy_;
      changed_.notify_all();
      continue;
    }
    if (stopping_ && queue_.empty()) return;
    if (d.kind == BatchDecision::Kind::kWaitUntil) {
      // The policy works in the injected clock; sleep for the same span of real time.
      changed_.wait_for(lock.native(), d.wake - options_.now());
    } else {
      changed_.wait(lock.native());
    }
  }
}

}  // namespace rankd
