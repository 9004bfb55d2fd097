#include "batching/batcher.h"

#include <algorithm>

#include "common/thread_name.h"

namespace rankd {

Batcher::Batcher(BatcherOptions options, RunBatch run_batch)
    : options_(std::move(options)), run_batch_(std::move(run_batch)) {
  for (int i = 0; i < std::max(1, options_.executors); ++i) {
    threads_.emplace_back([this] {
      NameThisThread("rankd-batch");
      ExecutorLoop();
    });
  }
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
  bool wake = false;
  {
    MutexLock lock(mu_);
    RANKD_RETURN_IF_ERROR(Refusal());
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
            bool wake = false;
            {
              MutexLock relock(b.mu_);
              --b.busy_;
              wake = b.WakeNeeded();  // an executor is free for what queued meanwhile
            }
            if (wake) b.changed_.notify_one();
          }
        } give_back{*this};
        std::vector<std::unique_ptr<BatchTask>> batch;
        batch.push_back(std::move(task));
        Run(std::move(batch));
        return Status::Ok();
      }
    }
    // Behind every task of equal or higher priority: arrival order within a priority.
    auto pos = std::find_if(queue_.begin(), queue_.end(), [&](const std::unique_ptr<BatchTask>& q) {
      return q->info.priority < task->info.priority;
    });
    if (queue_.empty()) nonempty_since_ = options_.now();
    queue_.insert(pos, std::move(task));
    wake = WakeNeeded();
  }
  if (wake) changed_.notify_one();
  return Status::Ok();
}

void Batcher::FailQueued(const Status& why) {
  std::vector<std::unique_ptr<BatchTask>> queued;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    failed_why_ = why;
    queued.swap(queue_);
  }
  changed_.notify_all();  // idle executors end; busy ones end after their batch
  for (auto& t : queued) t->Fail(why);
}

Status Batcher::Admission() {
  MutexLock lock(mu_);
  return Refusal();
}

Status Batcher::Refusal() {
  if (stopping_) return failed_why_.ok() ? Unavailable("the model is shutting down") : failed_why_;
  if (queue_.size() >= options_.policy.max_enqueued) {
    return Unavailable("the queue is full (" + std::to_string(queue_.size()) + " requests); retry later");
  }
  if (!queue_.empty()) {
    if (std::string why = Behind(options_.now()); !why.empty()) return Unavailable(why);
  }
  return Status::Ok();
}

std::string Batcher::Behind(BatchClock::time_point now) {
  using std::chrono::microseconds;
  const auto ms = [](auto d) { return std::to_string(std::chrono::duration_cast<microseconds>(d).count() / 1000); };
  const auto waited = now - queue_.front()->info.enqueued;
  const microseconds bound = options_.policy.max_queue_wait;
  if (bound.count() > 0) {
    if (waited <= bound) return "";
    return "the queue is behind: its oldest request has waited " + ms(waited) + " ms, more than the " + ms(bound) +
           " ms max_queue_wait_microseconds allows; retry later";
  }
  if (!options_.policy.auto_queue_wait || typical_run_us_ < 0) return "";
  const auto target =
      std::max(kAutoQueueWaitFloor, microseconds(static_cast<int64_t>(kAutoQueueWaitRuns * typical_run_us_)));
  const auto interval =
      std::max(kStandingQueueFloor, microseconds(static_cast<int64_t>(kStandingQueueBatches * last_batch_us_)));
  const auto stood = now - nonempty_since_;
  const bool shedding = shed_at_ != BatchClock::time_point::min() && now - shed_at_ < kStandingQueueMemory;
  if ((stood < interval && !shedding) || waited <= target) return "";
  shed_at_ = now;
  return "the queue is behind: " +
         (stood < interval ? std::string("it was shed within the last second")
                           : "it has not emptied for " + ms(stood) + " ms") +
         " and its oldest request has waited " + ms(waited) + " ms, more than the " + ms(target) + " ms that " +
         std::to_string(kAutoQueueWaitRuns) + " of its requests' run time allow; retry later";
}

void Batcher::Run(std::vector<std::unique_ptr<BatchTask>> batch) {
  struct Note {  // also when the run throws
    Batcher& b;
    size_t requests;
    BatchClock::time_point began;
    ~Note() {
      const double us = std::chrono::duration<double, std::micro>(b.options_.now() - began).count();
      const double per_request = us / static_cast<double>(requests);
      MutexLock lock(b.mu_);
      b.last_batch_us_ = us;
      // Down at once, up slowly: runs slowed by a busy host (requests arriving past capacity take
      // its cores) must not raise the bound that is to shed them.
      double& typical = b.typical_run_us_;
      typical = typical < 0 || per_request < typical ? per_request : typical + 0.01 * (per_request - typical);
    }
  } note{*this, std::max<size_t>(batch.size(), 1), options_.now()};
  run_batch_(std::move(batch));
}

uint64_t Batcher::ran_on_caller() const {
  MutexLock lock(mu_);
  return ran_on_caller_;
}

size_t Batcher::queued() const {
  MutexLock lock(mu_);
  return queue_.size();
}

BatchDecision Batcher::Decide() {
  infos_.clear();
  for (const auto& t : queue_) infos_.push_back(t->info);
  return DecideBatch(infos_, options_.now(), options_.executors - busy_, busy_, options_.policy);
}

bool Batcher::WakeNeeded() {
  if (idle_ == 0 || queue_.empty()) return false;
  const BatchDecision d = Decide();
  return d.kind == BatchDecision::Kind::kDispatch || !d.expired.empty() ||
         (d.kind == BatchDecision::Kind::kWaitUntil && d.wake < timer_);
}

void Batcher::ExecutorLoop() {
  MutexLock lock(mu_);
  while (true) {
    BatchDecision d = Decide();
    if (stopping_ && d.kind != BatchDecision::Kind::kIdle) {  // drain: run what is queued now
      d.kind = BatchDecision::Kind::kDispatch;
      if (d.count == 0) d.count = queue_.size() - d.expired.size();
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
      // Another idle executor decides on what is left, if that cannot wait for this one.
      const bool wake = WakeNeeded();
      lock.Unlock();
      if (wake) changed_.notify_one();
      for (auto& t : expired) t->Fail(DeadlineExceeded("the request's deadline passed while it was queued"));
      if (!batch.empty()) Run(std::move(batch));
      lock.Lock();
      if (d.kind == BatchDecision::Kind::kDispatch && d.count > 0) --busy_;
      continue;  // this executor, free again, decides next
    }
    if (stopping_ && queue_.empty()) return;
    ++idle_;
    if (d.kind == BatchDecision::Kind::kWaitUntil && d.wake < timer_) {
      // The one idle executor that wakes when the forming batch's delay runs out; the others
      // sleep until woken.
      timer_ = d.wake;
      // The policy works in the injected clock; sleep for the same span of real time.
      changed_.wait_for(lock.native(), d.wake - options_.now());
      if (timer_ == d.wake) timer_ = BatchClock::time_point::max();
    } else {
      changed_.wait(lock.native());
    }
    --idle_;
  }
}

}  // namespace rankd
