#include "runtime/executor_pool.h"

#include <algorithm>

#include "runtime/backends.h"

namespace rankd {

ExecutorPool::ExecutorPool(const Backend& backend, std::shared_ptr<ModelResources> resources, int max)
    : backend_(backend), resources_(std::move(resources)), max_(max) {}

StatusOr<std::unique_ptr<Executor>> ExecutorPool::Acquire() {
  {
    MutexLock lock(mu_);
    while (!(!idle_.empty() || max_ == 0 || created_ < max_)) freed_.wait(lock.native());
    if (!idle_.empty()) {
      std::unique_ptr<Executor> e = std::move(idle_.back());
      idle_.pop_back();
      return e;
    }
    ++created_;
  }
  auto created = NewExecutor(backend_, resources_);  // outside the lock: a GPU executor takes a while
  MutexLock lock(mu_);
  if (!created.ok()) {
    --created_;
    freed_.notify_one();
  } else {
    all_.push_back(created->get());
  }
  return created;
}

void ExecutorPool::Release(std::unique_ptr<Executor> executor) {
  bool takers;
  {
    MutexLock lock(mu_);
    idle_.push_back(std::move(executor));
    takers = takers_ > 0;
  }
  // An Acquire takes any executor, a Take only its own: while a Take waits, one wake-up could go to
  // the wrong waiter, so every waiter is woken; otherwise one is (no herd on a busy model).
  if (takers) {
    freed_.notify_all();
  } else {
    freed_.notify_one();
  }
}

std::unique_ptr<Executor> ExecutorPool::Take(const Executor* executor) {
  MutexLock lock(mu_);
  std::unique_ptr<Executor> taken;
  ++takers_;
  for (;;) {
    auto it = std::find_if(idle_.begin(), idle_.end(), [&](const auto& e) { return e.get() == executor; });
    if (it != idle_.end()) {
      taken = std::move(*it);
      idle_.erase(it);
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

}  // namespace rankd
