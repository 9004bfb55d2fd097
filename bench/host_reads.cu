// The all-miss lookup's ceiling: a kernel reading random rows of a page-locked host table in place
// (what a lookup does with a row its GPU cache lacks), against a plain page-locked host-to-device
// copy, for tables of several sizes, held in 4 KiB pages (cudaHostAlloc) or in transparent huge
// pages (madvise, then cudaHostRegister). Built by scripts/gpu_bundle.sh as .bundle/host_reads:
//
//   .bundle/host_reads [--gib 1,12,48] [--row-bytes 256] [--rows 4194304[,N...]] [--pages small,huge]
//                      [--order random[,sorted][,device-sorted]] [--unroll 1,4]
//
// prints one JSON line per case: bytes of rows read per second of kernel time (uniform random rows,
// so none is read twice from the GPU's L2; `sorted`: the same rows in ascending order, as a batch's
// misses would be read once sorted by address; `device-sorted`: the rows given in random order,
// sorted on the device by CUB's radix sort with their places, then read: the sort's time counted),
// and the copy's rate.
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <cub/device/device_radix_sort.cuh>

namespace {

#define CHECK(call)                                                                       \
  do {                                                                                    \
    cudaError_t e = (call);                                                               \
    if (e != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s: %s (line %d)\n", #call, cudaGetErrorString(e), __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

// Each group of `lanes` threads reads one row per step, 16 bytes a lane, `unroll` rows in flight a
// group; the XOR of what it read is written so that no load is dropped.
template <int kUnroll>
__global__ void ReadRows(const uint4* table, const int64_t* rows, int64_t n, int lanes, uint4* out) {
  const int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int lane = static_cast<int>(thread % lanes);
  const int64_t groups = gridDim.x * static_cast<int64_t>(blockDim.x) / lanes;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (int64_t i = thread / lanes; i < n; i += groups * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t r = i + u * groups;
      v[u] = r < n ? __ldcg(table + rows[r] * lanes + lane) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc.x ^= v[u].x, acc.y ^= v[u].y, acc.z ^= v[u].z, acc.w ^= v[u].w;
  }
  out[thread] = acc;
}

std::vector<int64_t> List(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');) v.push_back(std::stoll(x));
  return v;
}

// Touches every page from every core (the pages are made before they are locked).
void Touch(uint8_t* p, size_t bytes) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned c = 0; c < cores; ++c) {
    threads.emplace_back([=] {
      const size_t begin = bytes / cores * c, end = c + 1 == cores ? bytes : bytes / cores * (c + 1);
      std::memset(p + begin, static_cast<int>(c + 1), end - begin);
    });
  }
  for (std::thread& t : threads) t.join();
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// What one case of rows read: `rows` (on the device at `rows_d`) of `table` read in place by a kernel
// with each unroll, then gathered by the host's cores into a page-locked buffer and copied over.
struct Case {
  int64_t gib;
  std::string pages, order;
  double made_s;
};

void ReadCase(const uint8_t* table, const uint4* table_d, const std::vector<int64_t>& rows, const int64_t* rows_d,
              int64_t row_bytes, const std::vector<int64_t>& unrolls, int blocks, int threads, uint4* out_d,
              double copy_gb_s, const Case& c) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const int lanes = static_cast<int>(row_bytes / 16);
  cudaEvent_t begin, end;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));
  for (int64_t unroll : unrolls) {
    float best = 1e30f;
    for (int rep = 0; rep < 3; ++rep) {
      CHECK(cudaEventRecord(begin));
      if (unroll == 1)
        ReadRows<1><<<blocks, threads>>>(table_d, rows_d, n, lanes, out_d);
      else
        ReadRows<4><<<blocks, threads>>>(table_d, rows_d, n, lanes, out_d);
      CHECK(cudaGetLastError());
      CHECK(cudaEventRecord(end));
      CHECK(cudaEventSynchronize(end));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, begin, end));
      best = std::min(best, ms);
    }
    const double gb_s = static_cast<double>(n * row_bytes) / 1e9 / (best / 1e3);
    std::printf(
        "{\"case\": \"%s rows\", \"table_gib\": %lld, \"pages\": \"%s\", \"row_bytes\": %lld, \"rows\": %lld, "
        "\"unroll\": %d, \"kernel_ms\": %.3f, \"gb_s\": %.2f, \"of_copy\": %.3f, \"made_s\": %.1f}\n",
        c.order.c_str(), static_cast<long long>(c.gib), c.pages.c_str(), static_cast<long long>(row_bytes),
        static_cast<long long>(n), unroll == 1 ? 1 : 4, best, gb_s, gb_s / copy_gb_s, c.made_s);
    std::fflush(stdout);
  }
  CHECK(cudaEventDestroy(begin));
  CHECK(cudaEventDestroy(end));
  if (!table) return;  // not readable by the host
  // The host's cores gather the same rows into a page-locked buffer, then one copy moves them.
  const size_t gathered_bytes = static_cast<size_t>(n * row_bytes);
  uint8_t* staging = nullptr;
  void* staging_d = nullptr;
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&staging), gathered_bytes, cudaHostAllocDefault));
  CHECK(cudaMalloc(&staging_d, gathered_bytes));
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  double best_gather = 1e30, best_total = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto began = std::chrono::steady_clock::now();
    std::vector<std::thread> gatherers;
    for (unsigned k = 0; k < cores; ++k) {
      gatherers.emplace_back([&, k] {
        for (int64_t i = n / cores * k, e = k + 1 == cores ? n : n / cores * (k + 1); i < e; ++i) {
          std::memcpy(staging + i * row_bytes, table + rows[static_cast<size_t>(i)] * row_bytes,
                      static_cast<size_t>(row_bytes));
        }
      });
    }
    for (std::thread& t : gatherers) t.join();
    const double gather_s = Seconds(began);
    CHECK(cudaMemcpy(staging_d, staging, gathered_bytes, cudaMemcpyHostToDevice));
    best_gather = std::min(best_gather, gather_s);
    best_total = std::min(best_total, Seconds(began));
  }
  const double gb = static_cast<double>(gathered_bytes) / 1e9;
  std::printf(
      "{\"case\": \"host gather + copy\", \"order\": \"%s\", \"table_gib\": %lld, \"pages\": \"%s\", "
      "\"rows\": %lld, \"cores\": %u, \"gather_gb_s\": %.2f, \"gather_and_copy_gb_s\": %.2f}\n",
      c.order.c_str(), static_cast<long long>(c.gib), c.pages.c_str(), static_cast<long long>(n), cores,
      gb / best_gather, gb / best_total);
  std::fflush(stdout);
  CHECK(cudaFreeHost(staging));
  CHECK(cudaFree(staging_d));
}

// The rows given in random order, sorted on the device with their places (as a lookup would sort
// a batch's ids to read them in address order, then find each bag's rows by place), then read in
// place: the time of both, and of the sort alone.
void DeviceSortedCase(const uint4* table_d, const std::vector<int64_t>& rows, int64_t table_rows, int64_t row_bytes,
                      int blocks, int threads, uint4* out_d, double copy_gb_s, const Case& c) {
  const auto n = static_cast<int64_t>(rows.size());
  const int lanes = static_cast<int>(row_bytes / 16);
  int end_bit = 1;
  while ((int64_t{1} << end_bit) < table_rows) ++end_bit;
  int64_t *keys_in = nullptr, *keys_out = nullptr;
  int32_t *places_in = nullptr, *places_out = nullptr;
  const size_t count = static_cast<size_t>(n);
  CHECK(cudaMalloc(&keys_in, count * sizeof(int64_t)));
  CHECK(cudaMalloc(&keys_out, count * sizeof(int64_t)));
  CHECK(cudaMalloc(&places_in, count * sizeof(int32_t)));
  CHECK(cudaMalloc(&places_out, count * sizeof(int32_t)));
  std::vector<int32_t> places(count);
  for (size_t i = 0; i < count; ++i) places[i] = static_cast<int32_t>(i);
  CHECK(cudaMemcpy(keys_in, rows.data(), count * sizeof(int64_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(places_in, places.data(), count * sizeof(int32_t), cudaMemcpyHostToDevice));
  size_t temp_bytes = 0;
  CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in, keys_out, places_in, places_out, n, 0, end_bit));
  void* temp = nullptr;
  CHECK(cudaMalloc(&temp, temp_bytes));
  cudaEvent_t begin, sorted, end;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&sorted));
  CHECK(cudaEventCreate(&end));
  float best = 1e30f, best_sort = 1e30f;
  for (int rep = 0; rep < 3; ++rep) {
    CHECK(cudaEventRecord(begin));
    CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, places_in, places_out, n, 0, end_bit));
    CHECK(cudaEventRecord(sorted));
    ReadRows<4><<<blocks, threads>>>(table_d, keys_out, n, lanes, out_d);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(end));
    CHECK(cudaEventSynchronize(end));
    float ms = 0, sort_ms = 0;
    CHECK(cudaEventElapsedTime(&ms, begin, end));
    CHECK(cudaEventElapsedTime(&sort_ms, begin, sorted));
    best = std::min(best, ms);
    best_sort = std::min(best_sort, sort_ms);
  }
  const double gb_s = static_cast<double>(n * row_bytes) / 1e9 / (best / 1e3);
  std::printf(
      "{\"case\": \"device-sorted rows\", \"table_gib\": %lld, \"pages\": \"%s\", \"row_bytes\": %lld, "
      "\"rows\": %lld, \"sort_ms\": %.3f, \"kernel_ms\": %.3f, \"gb_s\": %.2f, \"of_copy\": %.3f}\n",
      static_cast<long long>(c.gib), c.pages.c_str(), static_cast<long long>(row_bytes), static_cast<long long>(n),
      best_sort, best, gb_s, gb_s / copy_gb_s);
  std::fflush(stdout);
  CHECK(cudaEventDestroy(begin));
  CHECK(cudaEventDestroy(sorted));
  CHECK(cudaEventDestroy(end));
  CHECK(cudaFree(temp));
  CHECK(cudaFree(keys_in));
  CHECK(cudaFree(keys_out));
  CHECK(cudaFree(places_in));
  CHECK(cudaFree(places_out));
}

}  // namespace

int main(int argc, char** argv) {
  std::string gib = "1,12,48", pages = "small,huge", counts = "4194304", orders = "random", unrolls = "1,4";
  int64_t row_bytes = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--gib")
      gib = value;
    else if (flag == "--row-bytes")
      row_bytes = std::stoll(value);
    else if (flag == "--rows")
      counts = value;
    else if (flag == "--order")
      orders = value;
    else if (flag == "--unroll")
      unrolls = value;
    else if (flag == "--pages")
      pages = value;
    else
      return std::fprintf(stderr, "unknown flag %s\n", flag.c_str()), 2;
  }
  int64_t most = 0;
  for (int64_t c : List(counts)) most = std::max(most, c);
  int64_t* rows_d = nullptr;
  uint4* out_d = nullptr;
  CHECK(cudaMalloc(&rows_d, static_cast<size_t>(most) * sizeof(int64_t)));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int threads = 256, blocks = sms * 8;
  CHECK(cudaMalloc(&out_d, static_cast<size_t>(threads) * blocks * sizeof(uint4)));
  cudaEvent_t begin, end;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));

  // The plain copy: 1 GiB from page-locked memory.
  const size_t copy_bytes = size_t{1} << 30;
  void *copy_h = nullptr, *copy_d = nullptr;
  CHECK(cudaHostAlloc(&copy_h, copy_bytes, cudaHostAllocDefault));
  CHECK(cudaMalloc(&copy_d, copy_bytes));
  std::memset(copy_h, 1, copy_bytes);
  float copy_ms = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CHECK(cudaEventRecord(begin));
    CHECK(cudaMemcpyAsync(copy_d, copy_h, copy_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaEventRecord(end));
    CHECK(cudaEventSynchronize(end));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, begin, end));
    copy_ms = std::min(copy_ms, ms);
  }
  const double copy_gb_s = static_cast<double>(copy_bytes) / 1e9 / (copy_ms / 1e3);
  std::printf("{\"case\": \"pinned copy\", \"bytes\": %zu, \"gb_s\": %.2f}\n", copy_bytes, copy_gb_s);
  CHECK(cudaFreeHost(copy_h));
  CHECK(cudaFree(copy_d));

  std::mt19937_64 rng(1);
  std::stringstream page_list(pages);
  std::vector<std::string> kinds, order_list;
  for (std::string k; std::getline(page_list, k, ',');) kinds.push_back(k);
  std::stringstream order_words(orders);
  for (std::string k; std::getline(order_words, k, ',');) order_list.push_back(k);
  for (int64_t g : List(gib)) {
    const size_t bytes = static_cast<size_t>(g) << 30;
    const int64_t table_rows = static_cast<int64_t>(bytes) / row_bytes;
    for (const std::string& kind : kinds) {
      const auto made = std::chrono::steady_clock::now();
      uint8_t* table = nullptr;
      uint4* table_d = nullptr;
      if (kind == "small") {
        CHECK(cudaHostAlloc(reinterpret_cast<void**>(&table), bytes, cudaHostAllocMapped));
        Touch(table, bytes);
      } else {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return std::perror("mmap"), 1;
        if (madvise(p, bytes, MADV_HUGEPAGE) != 0) std::perror("madvise(MADV_HUGEPAGE)");
        table = static_cast<uint8_t*>(p);
        Touch(table, bytes);
        CHECK(cudaHostRegister(table, bytes, cudaHostRegisterMapped));
      }
      const double made_s = Seconds(made);
      CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&table_d), table, 0));
      for (const int64_t n : List(counts)) {
        std::vector<int64_t> given(static_cast<size_t>(n));  // in random order
        std::uniform_int_distribution<int64_t> pick(0, table_rows - 1);
        for (int64_t& r : given) r = pick(rng);
        for (const std::string& order : order_list) {
          if (order == "device-sorted") {
            DeviceSortedCase(table_d, given, table_rows, row_bytes, blocks, threads, out_d, copy_gb_s,
                             {g, kind, order, made_s});
            continue;
          }
          std::vector<int64_t> rows = given;  // each order from the same random rows, whatever came before
          if (order == "sorted") std::sort(rows.begin(), rows.end());
          CHECK(cudaMemcpy(rows_d, rows.data(), rows.size() * sizeof(int64_t), cudaMemcpyHostToDevice));
          ReadCase(table, table_d, rows, rows_d, row_bytes, List(unrolls), blocks, threads, out_d, copy_gb_s,
                   {g, kind, order, made_s});
        }
      }
      if (kind == "small") {
        CHECK(cudaFreeHost(table));
      } else {
        CHECK(cudaHostUnregister(table));
        munmap(table, bytes);
      }
    }
  }
  return 0;
}
