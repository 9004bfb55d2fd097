#include "runtime/executor_pool.h"

#include <algorithm>

#include "runtime/backends.h"

namespace rankd {

ExecutorPool::ExecutorPool(std::vector<Replica> replicas, int max)
    : replicas_(std::move(replicas)), max_(max), slots_(replicas_.size()) {
  for (const Replica& r : replicas_) backends_.push_back(r.backend);
}

ExecutorPool::~ExecutorPool() {
  MutexLock lock(mu_);
  while (!slots_.empty()) slots_.pop_back();  // the executors, then their replicas, last first
  while (!replicas_.empty()) replicas_.pop_back();
}

int ExecutorPool::Pick() const {
  int best = -2;
  int best_busy = 0;
  for (size_t r = 0; r < replicas_.size(); ++r) {
    if (!replicas_[r].backend->Health().ok()) continue;
    if (best == -2) best = -1;  // a healthy replica: wait for it if nothing is free now
    const Slots& s = slots_[r];
    if (s.idle.empty() && max_ != 0 && s.created >= max_) continue;
    const int busy = s.created - static_cast<int>(s.idle.size());
    if (best < 0 || busy < best_busy) {
      best = static_cast<int>(r);
      best_busy = busy;
    }
  }
  return best;
}

StatusOr<std::unique_ptr<Executor>> ExecutorPool::Acquire(std::chrono::steady_clock::time_point deadline) {
  size_t r = 0;
  {
    MutexLock lock(mu_);
    int picked;
    while ((picked = Pick()) == -1) {
      if (deadline == std::chrono::steady_clock::time_point::max()) {
        freed_.wait(lock.native());
      } else if (freed_.wait_until(lock.native(), deadline) == std::cv_status::timeout && (picked = Pick()) == -1) {
        return DeadlineExceeded("the request's deadline passed while it waited for an executor");
      }
    }
    if (picked == -2) {
      Status health = replicas_[0].backend->Health();
      return health.ok() ? Unavailable("no replica of the model is healthy") : health;
    }
    r = static_cast<size_t>(picked);
    Slots& s = slots_[r];
    if (!s.idle.empty()) {
      std::unique_ptr<Executor> e = std::move(s.idle.back());
      s.idle.pop_back();
      return e;
    }
    ++s.created;
  }
  // Outside the lock: a GPU executor takes a while.
  auto created = NewExecutor(*replicas_[r].backend, replicas_[r].resources);
  MutexLock lock(mu_);
  if (!created.ok()) {
    --slots_[r].created;
    freed_.notify_one();
  } else {
    all_.push_back(created->get());
    replica_of_[created->get()] = r;
  }
  return created;
}

size_t ExecutorPool::Release(std::unique_ptr<Executor> executor) {
  bool takers;
  size_t replica;
  {
    MutexLock lock(mu_);
    replica = replica_of_.at(executor.get());
    slots_[replica].idle.push_back(std::move(executor));
    takers = takers_ > 0;
  }
  // An Acquire takes an executor of any healthy replica, a Take only its own: while a Take waits,
  // one wake-up could go to the wrong waiter, so every waiter is woken; otherwise one is. With
  // replicas too: waking every waiter on each release put a model on two GPUs past its capacity
  // into a herd of wake-ups on this lock (a release of a failed GPU's executor wakes one waiter,
  // who finds nothing and waits on).
  if (takers) {
    freed_.notify_all();
  } else {
    freed_.notify_one();
  }
  return replica;
}

std::unique_ptr<Executor> ExecutorPool::Take(const Executor* executor) {
  MutexLock lock(mu_);
  std::unique_ptr<Executor> taken;
  ++takers_;
  for (;;) {
    auto& idle = slots_[replica_of_.at(executor)].idle;
    auto it = std::find_if(idle.begin(), idle.end(), [&](const auto& e) { return e.get() == executor; });
    if (it != idle.end()) {
      taken = std::move(*it);
      idle.erase(it);
      break;
    }
    freed_.wait(lock.native());
  }
  --takers_;
  return taken;
}

std::vector<const Executor*> ExecutorPool::All() const {
  MutexLock lock(mu_);
  return all_;
}

size_t ExecutorPool::ReplicaOf(const Executor* executor) const {
  MutexLock lock(mu_);
  return replica_of_.at(executor);
}

int ExecutorPool::Busy(size_t r) const {
  MutexLock lock(mu_);
  return slots_[r].created - static_cast<int>(slots_[r].idle.size());
}

Status ExecutorPool::Health() const { return AnyHealthy(backends_); }

}  // namespace rankd
