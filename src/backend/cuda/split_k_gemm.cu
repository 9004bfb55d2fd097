// The split-k product kernel (split_k_gemm.h). A cluster of kParts blocks takes one 128 × 128
// output tile; block `part` takes the part-th share of k's 64-wide steps. In a block, warp 8's
// lane 0 issues TMA loads of A's and W's 128 × 64 pieces into four stages (mbarriers: full when
// the bytes have landed, empty when both consumer warpgroups' products have read them); warps 0-7
// are two warpgroups running wgmma (m64n128k16) on 64 rows each. Each block then writes its fp32
// sums to shared memory, the cluster meets, and block `part` adds the part-th slice of the tile's
// rows from every block's shared memory in rank order, adds the bias, applies the activation and
// stores it; the cluster meets again before any block leaves, so no block's sums go while read.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <atomic>

#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/per_device.h"
#include "backend/cuda/split_k_gemm.h"

namespace rankd::cuda {
namespace {

// Off (EnableSplitKGemm(false), `--cuda split_k=off`): every product left to cuBLASLt.
std::atomic<bool> split_k_on{true};
std::atomic<int64_t> split_k_runs{0};

constexpr int kTileM = 128, kTileN = 128, kTileK = 64, kStages = 4;
// A tile's k is split over a cluster of eight blocks, each taking at least kMinSteps of its 64-wide
// steps. On an H200, against cuBLASLt's heuristic choice (ncu, W1's products; docs/log/benchmarks.md),
// this won only with eight blocks over k = 3,456: the down-projections at 64 to 256 rows (8.2
// against 6.4 + 3.0 µs of split-K and its reduction at 64) and the top MLP's first layer at 64
// and 128. Four or two blocks a tile (more tiles), or k of 512 or 1,024, lost by 1 to 7 µs: the
// blocks' sums cross distributed shared memory, a fixed cost that a short share of k does not repay.
constexpr int kParts = 8, kMinSteps = 4;
constexpr int kConsumerThreads = 256, kBlockThreads = kConsumerThreads + 32;
constexpr int kPieceBytes = kTileM * kTileK * 2;  // a stage's piece of A or of W
constexpr int kStageBytes = 2 * kPieceBytes;
constexpr int kSumStride =
    kTileN + 4;  // floats a row of a block's sums: padded, so a warp's float2 stores spread over banks
constexpr int kSumBytes = kTileM * kSumStride * 4;
constexpr int kSmemBytes = kStages * kStageBytes + kSumBytes + 1024 + 128;  // + alignment, barriers

struct Maps {
  CUtensorMap a, w;
};

template <bool kBf16Out>
__global__ void __launch_bounds__(kBlockThreads, 1)
    SplitKKernel(const __grid_constant__ Maps maps, const SplitKProduct p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int part = static_cast<int>(cluster.block_rank());
  extern __shared__ unsigned char smem_raw[];
  auto* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  unsigned char* stages = smem;
  auto* sums = reinterpret_cast<float*>(smem + kStages * kStageBytes);
  auto* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes + kSumBytes);
  uint64_t* empty = full + kStages;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int producer = kConsumerThreads / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      BarrierInit(&full[s], 1);
      BarrierInit(&empty[s], kConsumerThreads / 32);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  } else if (warp == producer && lane == 0) {  // the maps' descriptors fetched while the barriers are set up
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&maps.a)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&maps.w)) : "memory");
  }
  __syncthreads();
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k_steps = static_cast<int>(p.k) / kTileK;
  const int tile = static_cast<int>(blockIdx.x) / kParts, column_tiles = n / kTileN;
  const int m0 = tile / column_tiles * kTileM, n0 = tile % column_tiles * kTileN;
  const int first = k_steps * part / kParts, last = k_steps * (part + 1) / kParts;
  if (warp == producer) {
    if (lane == 0) {
      // The weight's pieces of the first stages load while the kernel before finishes (dependent_launch.cuh).
      const int early = min(kStages, last - first);
      for (int it = 0; it < early; ++it) {
        BarrierExpect(&full[it], kStageBytes);
        TmaLoad(stages + it * kStageBytes + kPieceBytes, &maps.w, (first + it) * kTileK, n0, &full[it]);
      }
      WaitForPrevious();
      for (int t = first, it = 0; t < last; ++t, ++it) {
        const int s = it % kStages;
        if (it >= early) {
          BarrierWait(&empty[s], (it / kStages - 1) & 1);
          BarrierExpect(&full[s], kStageBytes);
          TmaLoad(stages + s * kStageBytes + kPieceBytes, &maps.w, t * kTileK, n0, &full[s]);
        }
        TmaLoad(stages + s * kStageBytes, &maps.a, t * kTileK, m0, &full[s]);
      }
    } else {
      WaitForPrevious();
    }
  } else {
    WaitForPrevious();
    const int group_row = warp / 4 * 64;  // the warpgroup's first row in the tile
    float acc[1][64];                     // one 64-row block of the tile (StageProducts)
    for (int it = 0; it < last - first; ++it) {
      const unsigned char* stage = stages + it % kStages * kStageBytes;
      StageProducts(acc, stage + group_row * 128, stage + kPieceBytes, &full[it % kStages], (it / kStages) & 1, it > 0);
      if (it > 0 && lane == 0) BarrierArrive(&empty[(it - 1) % kStages]);  // the previous step's stage is free
    }
    WgmmaWait<0>();
    // Accumulator 4i + 2e + j of a lane: row 16·(warp % 4) + lane / 4 + 8e, column 8i + 2·(lane % 4) + j.
    const int row = group_row + (warp % 4) * 16 + lane / 4, column = 2 * (lane % 4);
    if (m0 + row < m) {  // rows past the end stay unread
#pragma unroll
      for (int i = 0; i < kTileN / 8; ++i) {
        *reinterpret_cast<float2*>(&sums[row * kSumStride + 8 * i + column]) =
            make_float2(acc[0][4 * i], acc[0][4 * i + 1]);
      }
    }
    if (m0 + row + 8 < m) {
#pragma unroll
      for (int i = 0; i < kTileN / 8; ++i) {
        *reinterpret_cast<float2*>(&sums[(row + 8) * kSumStride + 8 * i + column]) =
            make_float2(acc[0][4 * i + 2], acc[0][4 * i + 3]);
      }
    }
  }
  LetNextStart();  // the products are done: the next kernel's blocks may take free SMs and set up
  cluster.sync();
  // This block's share of the tile's rows before the end, four columns a thread at a time.
  const int vectors = min(kTileM, m - m0) * (kTileN / 4);
  for (int v = vectors * part / kParts + static_cast<int>(threadIdx.x); v < vectors * (part + 1) / kParts;
       v += kBlockThreads) {
    const int row = v / (kTileN / 4), column = v % (kTileN / 4) * 4;
    float4 x[kParts];
#pragma unroll
    for (int q = 0; q < kParts; ++q)
      x[q] = *cluster.map_shared_rank(reinterpret_cast<float4*>(&sums[row * kSumStride + column]), q);
    float4 sum = x[0];
#pragma unroll
    for (int q = 1; q < kParts; ++q) sum.x += x[q].x, sum.y += x[q].y, sum.z += x[q].z, sum.w += x[q].w;
    const int j = n0 + column;
    const float b[4] = {p.bias ? p.bias[j] : 0.f, p.bias ? p.bias[j + 1] : 0.f, p.bias ? p.bias[j + 2] : 0.f,
                        p.bias ? p.bias[j + 3] : 0.f};
    const float y[4] = {Activate(p.activation, sum.x + b[0]), Activate(p.activation, sum.y + b[1]),
                        Activate(p.activation, sum.z + b[2]), Activate(p.activation, sum.w + b[3])};
    const int64_t at = static_cast<int64_t>(m0 + row) * n + j;
    if constexpr (kBf16Out) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(y[0], y[1]), hi = __floats2bfloat162_rn(y[2], y[3]);
      uint2 bits;
      memcpy(&bits.x, &lo, 4);
      memcpy(&bits.y, &hi, 4);
      *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(p.d) + at) = bits;
    } else {
      *reinterpret_cast<float4*>(p.c + at) = make_float4(y[0], y[1], y[2], y[3]);
    }
  }
  cluster.sync();
#endif
}

// The launch attribute that groups the blocks in clusters of kParts.
cudaLaunchAttribute ClusterOfParts() {
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = kParts, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
  return cluster;
}

// The clusters of kParts blocks the device runs at once (its shared memory allowed first, once);
// zero where the kernel cannot run.
int ClustersAtOnce() {
  static PerDevice<int> per_device;
  return per_device.Get([] {
    if (HopperSmCount() == 0) return 0;
    for (auto kernel : {SplitKKernel<false>, SplitKKernel<true>}) {
      if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes) != cudaSuccess) {
        cudaGetLastError();
        return 0;
      }
    }
    cudaLaunchAttribute cluster = ClusterOfParts();
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(kParts);
    config.blockDim = dim3(kBlockThreads);
    config.dynamicSmemBytes = kSmemBytes;
    config.attrs = &cluster;
    config.numAttrs = 1;
    int count = 0;
    if (cudaOccupancyMaxActiveClusters(&count, SplitKKernel<true>, &config) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return count;
  });
}

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool SplitKFits(const SplitKProduct& p) {
  if (!split_k_on.load(std::memory_order_relaxed)) return false;
  const int clusters = ClustersAtOnce();
  if (clusters == 0 || p.m < 1 || p.m > INT32_MAX || p.n % kTileN != 0 || p.n > INT32_MAX || p.k % kTileK != 0 ||
      p.k > INT32_MAX || p.m * p.n > INT32_MAX || !Aligned(p.a) || !Aligned(p.w) ||
      (p.d ? !Aligned(p.d) : !p.c || !Aligned(p.c))) {
    return false;
  }
  const int64_t tiles = p.n / kTileN * ((p.m + kTileM - 1) / kTileM);
  return p.k / kTileK >= kParts * kMinSteps && tiles <= clusters;
}

Status SplitKGemm(cudaStream_t stream, const SplitKProduct& p) {
  if (!SplitKFits(p)) return Internal("a product the split-k kernel does not take");
  Maps maps;
  RANKD_RETURN_IF_ERROR(RowsMap(&maps.a, p.a, p.m, p.k, kTileM));
  RANKD_RETURN_IF_ERROR(RowsMap(&maps.w, p.w, p.n, p.k, kTileN));
  const int64_t tiles = p.n / kTileN * ((p.m + kTileM - 1) / kTileM);
  const dim3 grid(static_cast<unsigned>(tiles * kParts));
  const cudaLaunchAttribute cluster = ClusterOfParts();
  const cudaError_t launched = LaunchDependent(p.d ? SplitKKernel<true> : SplitKKernel<false>, grid,
                                               dim3(kBlockThreads), kSmemBytes, stream, &cluster, maps, p);
  split_k_runs.fetch_add(1, std::memory_order_relaxed);
  return Check(launched, "SplitKKernel");
}

void PrepareSplitKGemm() { ClustersAtOnce(); }

void EnableSplitKGemm(bool on) { split_k_on.store(on, std::memory_order_relaxed); }

int64_t SplitKGemmRuns() { return split_k_runs.load(std::memory_order_relaxed); }

}  // namespace rankd::cuda
