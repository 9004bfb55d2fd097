// A CUPTI activity library the CUDA driver loads into any program through CUDA_INJECTION64_PATH: it
// writes every kernel, copy and memset the program runs on the device to $RANKD_TRACE_OUT as CSV
// lines "kind,start_ns,end_ns,stream,name" (kind K, C or S; a copy's name is "kind bytes"), for
// bench/trace_summary.py. The device machine's nsys cannot import its own traces; this needs only
// libcupti. Built into the bundle by scripts/gpu_bundle.sh; bench/gpu_quick.sh's trace step runs it.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

FILE* out = nullptr;
std::mutex out_mu;
constexpr size_t kBufferBytes = 16 << 20;

void CUPTIAPI GiveBuffer(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI TakeBuffer(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(out_mu);
  CUpti_Activity* record = nullptr;
  while (out && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      std::fprintf(out, "K,%llu,%llu,%u,%s\n", static_cast<unsigned long long>(k->start),
                   static_cast<unsigned long long>(k->end), k->streamId, k->name ? k->name : "?");
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      std::fprintf(out, "C,%llu,%llu,%u,%u %llu\n", static_cast<unsigned long long>(c->start),
                   static_cast<unsigned long long>(c->end), c->streamId, static_cast<unsigned>(c->copyKind),
                   static_cast<unsigned long long>(c->bytes));
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* s = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      std::fprintf(out, "S,%llu,%llu,%u,memset %llu\n", static_cast<unsigned long long>(s->start),
                   static_cast<unsigned long long>(s->end), s->streamId, static_cast<unsigned long long>(s->bytes));
    }
  }
  std::free(buffer);
}

void FlushAtExit() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(out_mu);
  if (out) std::fclose(out);
  out = nullptr;
}

}  // namespace

extern "C" int InitializeInjection() {
  const char* path = std::getenv("RANKD_TRACE_OUT");
  out = std::fopen(path ? path : "trace.csv", "w");
  if (!out) return 0;
  if (cuptiActivityRegisterCallbacks(GiveBuffer, TakeBuffer) != CUPTI_SUCCESS) return 0;
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET}) {
    if (cuptiActivityEnable(kind) != CUPTI_SUCCESS) return 0;
  }
  std::atexit(FlushAtExit);
  return 1;
}
