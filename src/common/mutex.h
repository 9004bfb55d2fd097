// Mutex and MutexLock: std::mutex with clang's thread-safety annotations, so that a field marked
// RANKD_GUARDED_BY(mu_) read or written without mu_ held fails to compile under clang
// (-Wthread-safety, in the sanitizer build CI runs). Other compilers see plain std::mutex.
//
//   mutable Mutex mu_;
//   std::vector<int> items_ RANKD_GUARDED_BY(mu_);
//   void Add(int x) { MutexLock lock(mu_); items_.push_back(x); }
//
// A condition variable waits on MutexLock::native(); the analysis then takes the mutex as held
// throughout the wait, which it is whenever the caller's code runs. Write wait predicates as loops
// in the locked function (`while (!ready_) cv_.wait(lock.native());`): a lambda's body is checked
// as a function of its own, without the lock.
#pragma once

#include <mutex>

#if defined(__clang__)
#define RANKD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define RANKD_THREAD_ANNOTATION(x)
#endif

#define RANKD_CAPABILITY(x) RANKD_THREAD_ANNOTATION(capability(x))
#define RANKD_SCOPED_CAPABILITY RANKD_THREAD_ANNOTATION(scoped_lockable)
#define RANKD_GUARDED_BY(x) RANKD_THREAD_ANNOTATION(guarded_by(x))
#define RANKD_PT_GUARDED_BY(x) RANKD_THREAD_ANNOTATION(pt_guarded_by(x))
#define RANKD_REQUIRES(...) RANKD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define RANKD_ACQUIRE(...) RANKD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RANKD_RELEASE(...) RANKD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RANKD_EXCLUDES(...) RANKD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

namespace rankd {

class RANKD_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() RANKD_ACQUIRE() { mu_.lock(); }
  void Unlock() RANKD_RELEASE() { mu_.unlock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction, or between Unlock and Lock.
class RANKD_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) RANKD_ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() RANKD_RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RANKD_RELEASE() { lock_.unlock(); }
  void Lock() RANKD_ACQUIRE() { lock_.lock(); }
  // For std::condition_variable's waits, which release the mutex and take it back.
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace rankd
