#include "runtime/capture_worker.h"

#include "common/thread_name.h"

namespace rankd {

CaptureWorker::CaptureWorker()
    : thread_([this] {
        NameThisThread("rankd-capture");
        Loop();
      }) {}

CaptureWorker::~CaptureWorker() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    jobs_.clear();
  }
  changed_.notify_all();
  thread_.join();
}

bool CaptureWorker::Submit(uint64_t plan_id, std::function<void()> job) {
  {
    MutexLock lock(mu_);
    if (stop_ || !pending_.insert(plan_id).second) return false;
    jobs_.emplace_back(plan_id, std::move(job));
  }
  changed_.notify_all();
  return true;
}

void CaptureWorker::Drain() {
  MutexLock lock(mu_);
  while (!(stop_ || (jobs_.empty() && !running_job_))) changed_.wait(lock.native());
}

void CaptureWorker::Loop() {
  MutexLock lock(mu_);
  for (;;) {
    while (!(stop_ || !jobs_.empty())) changed_.wait(lock.native());
    if (stop_) return;
    auto [plan_id, job] = std::move(jobs_.front());
    jobs_.pop_front();
    running_job_ = true;
    lock.Unlock();
    job();
    lock.Lock();
    pending_.erase(plan_id);
    running_job_ = false;
    changed_.notify_all();
  }
}

}  // namespace rankd
