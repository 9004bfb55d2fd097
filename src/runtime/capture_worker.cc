#include "runtime/capture_worker.h"

namespace rankd {

CaptureWorker::CaptureWorker() : thread_([this] { Loop(); }) {}

CaptureWorker::~CaptureWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    jobs_.clear();
  }
  changed_.notify_all();
  thread_.join();
}

bool CaptureWorker::Submit(uint64_t plan_id, std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || !pending_.insert(plan_id).second) return false;
    jobs_.emplace_back(plan_id, std::move(job));
  }
  changed_.notify_all();
  return true;
}

void CaptureWorker::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return stop_ || (jobs_.empty() && !running_job_); });
}

void CaptureWorker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    auto [plan_id, job] = std::move(jobs_.front());
    jobs_.pop_front();
    running_job_ = true;
    lock.unlock();
    job();
    lock.lock();
    pending_.erase(plan_id);
    running_job_ = false;
    changed_.notify_all();
  }
}

}  // namespace rankd
