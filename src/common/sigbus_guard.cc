#include "common/sigbus_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "common/mutex.h"

namespace rankd {
namespace {

// The watched ranges, read lock-free from the handler. A slot is free when its begin is 0.
struct Slot {
  std::atomic<uintptr_t> begin{0}, end{0};
  std::atomic<bool> writable{false}, faulted{false};
};
Slot g_slots[SigbusGuard::kMaxRanges];
Mutex g_slots_mu;  // serialises taking and freeing slots
struct sigaction g_previous;

void OnSigbus(int signal, siginfo_t* info, void* context) {
  auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    uintptr_t begin = s.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr >= s.end.load(std::memory_order_acquire)) continue;
    // The object shrank under the mapping: zero pages over all of it, so this access and every
    // later one complete. mmap is a system call, safe in a handler.
    const int prot = s.writable.load(std::memory_order_acquire) ? PROT_READ | PROT_WRITE : PROT_READ;
    ::mmap(reinterpret_cast<void*>(begin), s.end.load() - begin, prot, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    s.faulted.store(true, std::memory_order_release);
    return;
  }
  // Not a watched range: whoever handled SIGBUS before us, or the default (the fault repeats).
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) {
    g_previous.sa_sigaction(signal, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal);
  } else {
    ::signal(SIGBUS, SIG_DFL);
  }
}

void InstallHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous);
  });
}

}  // namespace

std::unique_ptr<SigbusGuard> SigbusGuard::Watch(const void* at, size_t bytes, bool writable) {
  InstallHandler();
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(at) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(at) + bytes + page - 1) / page * page;
  MutexLock lock(g_slots_mu);
  for (int i = 0; i < kMaxRanges; ++i) {
    if (g_slots[i].begin.load() != 0) continue;
    g_slots[i].faulted.store(false);
    g_slots[i].writable.store(writable);
    g_slots[i].end.store(end, std::memory_order_release);
    g_slots[i].begin.store(begin, std::memory_order_release);
    return std::unique_ptr<SigbusGuard>(new SigbusGuard(i));
  }
  return nullptr;
}

SigbusGuard::~SigbusGuard() {
  MutexLock lock(g_slots_mu);
  g_slots[slot_].begin.store(0, std::memory_order_release);
}

bool SigbusGuard::faulted() const { return g_slots[slot_].faulted.load(std::memory_order_acquire); }

bool SigbusGuard::Overlaps(const void* at, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(at), end = begin + bytes;
  MutexLock lock(g_slots_mu);
  for (const Slot& s : g_slots) {
    const uintptr_t b = s.begin.load(std::memory_order_acquire);
    if (b != 0 && begin < s.end.load(std::memory_order_acquire) && b < end) return true;
  }
  return false;
}

}  // namespace rankd
