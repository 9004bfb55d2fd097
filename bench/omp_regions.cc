// An LD_PRELOAD library that logs a program's OpenMP parallel regions (libgomp's GOMP_parallel):
// the caller (library and symbol), the threads it asked for, how long the region took and how
// many threads were created during it (pthread_create). It found libgomp ending and remaking
// 8 threads per W1 request at 2-8 pairs (docs/log/benchmarks.md, "W1 at 2-8 pairs on the CPU").
//
//   g++ -std=c++20 -O2 -Wall -Wextra -Werror -shared -fPIC -o omp_regions.so bench/omp_regions.cc -ldl
//   OMP_REGIONS_OUT=regions.txt LD_PRELOAD=$PWD/omp_regions.so rankd bench engine ...
//
// The output holds the totals and the last 600 regions, one a line:
//   <index> asked <threads, 0 = the default> us <microseconds> created <threads> <library>+<offset> <symbol>
#include <cxxabi.h>
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Region {
  void* caller;
  unsigned asked;
  double us;
  long created;
};

constexpr size_t kKept = size_t{1} << 22;
std::vector<Region>* regions;  // the regions, from the first; full at kKept
std::atomic<long> creates{0};
std::mutex mu;  // guards regions (several threads may open regions)

template <typename F>
F Next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

std::string Symbol(void* address, Dl_info& info) {
  if (!dladdr(address, &info) || !info.dli_sname) return "?";
  int status = 0;
  char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : info.dli_sname;
  free(demangled);
  return name.substr(0, 160);
}

__attribute__((destructor)) void Write() {
  std::lock_guard lock(mu);
  if (!regions) return;
  const char* path = getenv("OMP_REGIONS_OUT");
  FILE* f = fopen(path ? path : "omp_regions.txt", "w");
  if (!f) return;
  fprintf(f, "regions %zu, pthread_create %ld\n", regions->size(), creates.load());
  size_t n = regions->size();
  for (size_t i = n > 600 ? n - 600 : 0; i < n; ++i) {
    const Region& r = (*regions)[i];
    Dl_info info{};
    std::string symbol = Symbol(r.caller, info);
    const char* library = info.dli_fname ? strrchr(info.dli_fname, '/') : nullptr;
    fprintf(f, "%zu asked %u us %.1f created %ld %s+%lx %s\n", i, r.asked, r.us, r.created, library ? library + 1 : "?",
            static_cast<unsigned long>(static_cast<char*>(r.caller) - static_cast<char*>(info.dli_fbase)),
            symbol.c_str());
  }
  fclose(f);
}

}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  static auto next = Next<int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*)>("pthread_create");
  creates.fetch_add(1);
  return next(thread, attr, start, arg);
}

extern "C" void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) {
  static auto next = Next<void (*)(void (*)(void*), void*, unsigned, unsigned)>("GOMP_parallel");
  long created_before = creates.load();
  auto start = std::chrono::steady_clock::now();
  next(fn, data, num_threads, flags);
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard lock(mu);
  if (!regions) {
    regions = new std::vector<Region>();
    regions->reserve(kKept);
  }
  if (regions->size() < kKept) {
    regions->push_back({__builtin_return_address(0), num_threads, us, creates.load() - created_before});
  }
}
