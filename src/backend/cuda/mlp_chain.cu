// The MLP chain kernel (mlp_chain.h). A cluster of kBlocks blocks takes kRows rows. Block `rank`
// owns columns [rank · S, rank · S + S) of each hidden layer (S = n / kBlocks): its eight warps
// multiply the layer's input rows, held whole in shared memory, by those columns' weight rows,
// which cp.async streams through kStages stages of kChunk k each, one stream across the layers
// (the first stages are requested before the kernel waits for the one before it). A layer's
// share goes to shared memory in bf16; the cluster meets and every block copies all shares into
// its input rows for the next layer. The head (at most kHeadColumns columns) needs no swap: each
// block sums over its own share of the last hidden layer, the cluster meets, and each block adds
// the blocks' sums for its rows in rank order. The cluster meets once more before any block
// leaves, so no block's shared memory goes while read.
//
// mma.sync m16n8k16 (mma.cuh) reads its k in a permuted order, the same for A and B, so that a
// lane loads 16 bytes of a row at once: over 32 k, lane 4g + t takes k 8t..8t+7 of its rows, the
// first four as the first step's k (2t, 2t+1, 2t+8, 2t+9) and the last four as the second's.
#include "backend/cuda/mlp_chain.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <atomic>

#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/mma.cuh"

namespace rankd::cuda {
namespace {

std::atomic<bool> chain_on{SwitchedOn("RANKD_MLP_CHAIN")};
std::atomic<int64_t> chain_runs{0};

// 48 rows a cluster: W1's 512 pairs take 11 clusters, which an H200 runs at once (one block an
// SM; 16 clusters of 32 rows would not all fit).
constexpr int kBlocks = 8, kRows = 48, kRowTiles = kRows / 16, kWarps = 8, kBlockThreads = kWarps * 32;
// A stage holds kChunk of k for a share's weight rows; three of four stages in flight.
constexpr int kChunk = 128, kSteps = kChunk / 32, kStages = 4;
// 16-byte pieces a thread loads before it stores any, where it copies through registers.
constexpr int kBatch = 8;
constexpr int kMaxK = 1024, kMaxShare = 64, kHeadColumns = 8;
// Rows of the input and of a weight stage are padded by 64 bytes: the eight lanes of a quarter
// warp read 16 bytes each of two rows, which then fall on different banks.
constexpr int kInStride = kMaxK + 32;        // bf16 elements a row of the layer's input
constexpr int kStageStride = kChunk + 32;    // a weight row's piece in a stage
constexpr int kShareStride = kMaxShare + 8;  // a row of the block's share of a hidden layer
// A warp's sums: its kRowTiles × 2 tiles of 16 × 8, four floats a lane each.
constexpr int kWarpSums = kRowTiles * 2 * 4 * 32;
constexpr int kInBytes = kRows * kInStride * 2;
constexpr int kStageBytes = kMaxShare * kStageStride * 2;
constexpr int kShareBytes = kRows * kShareStride * 2;
constexpr int kPartBytes = (kWarps - 1) * kWarpSums * 4;  // the sums of warps past the first part of k
constexpr int kSumBytes = kRows * kHeadColumns * 4;
constexpr int kSmemBytes = kInBytes + kStages * kStageBytes + kShareBytes + kPartBytes + kSumBytes;
static_assert(kRows % 16 == 0 && kRows % kBlocks == 0, "row tiles of 16, and the head's rows shared by the blocks");
static_assert(kSmemBytes <= 227 * 1024, "an sm_90 block's shared memory");

__device__ __forceinline__ void CopyAsync16(void* to, const void* from) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(address), "l"(from) : "memory");
}
__device__ __forceinline__ void CommitCopies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void WaitCopies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// Positions start, start + step, ... of a [rows, columns] grid, walked without a division a step.
struct GridWalk {
  int row, column, columns, step_rows, step_columns;
  __device__ GridWalk(int start, int step, int grid_columns)
      : row(start / grid_columns), column(start % grid_columns), columns(grid_columns), step_rows(step / grid_columns),
        step_columns(step % grid_columns) {}
  __device__ void Next() {
    row += step_rows;
    column += step_columns;
    if (column >= columns) column -= columns, ++row;
  }
};

// Requests chunk q of the stream of the hidden layers' weight pieces (layer by layer, kChunk k
// each) into its stage; a q past the stream requests nothing. Every thread commits a group
// either way, so that group q is chunk q's.
__device__ void RequestChunk(const MlpChainRun& r, int rank, int q, __nv_bfloat16* stages) {
  __nv_bfloat16* stage = stages + (q % kStages) * (kStageBytes / 2);
  for (int l = 0; l + 1 < r.layers; ++l) {
    const int chunks = r.layer[l].k / kChunk;
    if (q >= chunks) {
      q -= chunks;
      continue;
    }
    const int share = r.layer[l].n / kBlocks, k = r.layer[l].k;
    const auto* w = static_cast<const __nv_bfloat16*>(r.layer[l].w) + static_cast<int64_t>(rank) * share * k + q * kChunk;
    for (int i = static_cast<int>(threadIdx.x); i < share * (kChunk / 8); i += kBlockThreads) {
      const int row = i / (kChunk / 8), piece = i % (kChunk / 8);
      CopyAsync16(stage + row * kStageStride + piece * 8, w + static_cast<int64_t>(row) * k + piece * 8);
    }
    break;
  }
  CommitCopies();
}

// The layer's input rows (zeros past the batch) in bf16: a bf16 copy by cp.async, fp32 converted
// kBatch pieces a thread at a time (every load before any store, which could otherwise alias it).
__device__ void LoadInput(const MlpChainRun& r, int64_t first_row, __nv_bfloat16* in) {
  const int k0 = r.layer[0].k, per_row = k0 / 8, pieces = kRows * per_row;
  if (r.x_bf16) {
    GridWalk at(static_cast<int>(threadIdx.x), kBlockThreads, per_row);
    for (int i = static_cast<int>(threadIdx.x); i < pieces; i += kBlockThreads, at.Next()) {
      __nv_bfloat16* to = in + at.row * kInStride + at.column * 8;
      if (first_row + at.row < r.m) {
        CopyAsync16(to, static_cast<const __nv_bfloat16*>(r.x) + (first_row + at.row) * k0 + at.column * 8);
      } else {
        *reinterpret_cast<uint4*>(to) = make_uint4(0, 0, 0, 0);
      }
    }
    return;
  }
  GridWalk at(static_cast<int>(threadIdx.x), kBlockThreads, per_row);
  for (int first = static_cast<int>(threadIdx.x); first < pieces; first += kBatch * kBlockThreads) {
    uint4 v[kBatch];
    GridWalk load = at;
#pragma unroll
    for (int u = 0; u < kBatch; ++u, load.Next()) {
      v[u] = make_uint4(0, 0, 0, 0);
      if (first + u * kBlockThreads < pieces && first_row + load.row < r.m) {
        const float* x = static_cast<const float*>(r.x) + (first_row + load.row) * k0 + load.column * 8;
        const float4 a = *reinterpret_cast<const float4*>(x), b = *reinterpret_cast<const float4*>(x + 4);
        v[u] = make_uint4(Pack(a.x, a.y), Pack(a.z, a.w), Pack(b.x, b.y), Pack(b.z, b.w));
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u, at.Next()) {
      if (first + u * kBlockThreads < pieces) *reinterpret_cast<uint4*>(in + at.row * kInStride + at.column * 8) = v[u];
    }
  }
}

__global__ void __launch_bounds__(kBlockThreads, 1) MlpChainKernelImpl(const __grid_constant__ MlpChainRun r) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  extern __shared__ __align__(16) unsigned char smem[];
  auto* in = reinterpret_cast<__nv_bfloat16*>(smem);
  auto* stages = reinterpret_cast<__nv_bfloat16*>(smem + kInBytes);
  auto* share = reinterpret_cast<__nv_bfloat16*>(smem + kInBytes + kStages * kStageBytes);
  auto* parts_sums = reinterpret_cast<float*>(smem + kInBytes + kStages * kStageBytes + kShareBytes);
  auto* sums = reinterpret_cast<float*>(smem + kInBytes + kStages * kStageBytes + kShareBytes + kPartBytes);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t first_row = static_cast<int64_t>(blockIdx.x / kBlocks) * kRows;

  // The weights are constants: their first stages may be requested before the inputs are ready.
  for (int q = 0; q < kStages - 1; ++q) RequestChunk(r, rank, q, stages);
  WaitForPrevious();
  LoadInput(r, first_row, in);
  CommitCopies();
  WaitCopies<0>();  // the input, and the first weight stages, requested long before
  __syncthreads();

  // The hidden layers. A share of `width` columns is width / 16 groups of 16; warp w takes group
  // w % groups for all kRows rows (kRowTiles × 2 tiles of 16 × 8, each A piece read once for two
  // tiles and each B piece for kRowTiles), and the k steps of 32 numbered w / groups modulo parts.
  // The parts' sums then meet in the first part's warps, in part order.
  int q = 0;
  for (int l = 0; l + 1 < r.layers; ++l) {
    const MlpChainLayer& layer = r.layer[l];
    const int width = layer.n / kBlocks, groups = width / 16, parts = kWarps / groups, k = layer.k;
    const int group = warp % groups, part = warp / groups;
    float acc[kRowTiles][2][4] = {};
    const __nv_bfloat16* a_row = in + g * kInStride + 8 * t;
    for (int c = 0; c < k / kChunk; ++c, ++q) {
      RequestChunk(r, rank, q + kStages - 1, stages);
      WaitCopies<kStages - 1>();
      __syncthreads();
      const __nv_bfloat16* b_row = stages + (q % kStages) * (kStageBytes / 2) + (group * 16 + g) * kStageStride + 8 * t;
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        if ((c * kSteps + s) % parts != part) continue;
        const uint4 b0 = *reinterpret_cast<const uint4*>(b_row + s * 32);
        const uint4 b1 = *reinterpret_cast<const uint4*>(b_row + 8 * kStageStride + s * 32);
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          const __nv_bfloat16* a = a_row + rt * 16 * kInStride + c * kChunk + s * 32;
          const uint4 lo = *reinterpret_cast<const uint4*>(a), hi = *reinterpret_cast<const uint4*>(a + 8 * kInStride);
          const uint32_t first[4] = {lo.x, hi.x, lo.y, hi.y}, second[4] = {lo.z, hi.z, lo.w, hi.w};
          Mma(acc[rt][0], first, b0.x, b0.y);
          Mma(acc[rt][1], first, b1.x, b1.y);
          Mma(acc[rt][0], second, b0.z, b0.w);
          Mma(acc[rt][1], second, b1.z, b1.w);
        }
      }
      __syncthreads();  // the stage is free for the request kStages - 1 chunks on
    }
    if (parts > 1) {
      float* mine = parts_sums + (warp - groups) * kWarpSums + lane;
      if (part > 0) {
#pragma unroll
        for (int i = 0; i < kRowTiles * 2 * 4; ++i) mine[i * 32] = (&acc[0][0][0])[i];
      }
      __syncthreads();
      if (part == 0) {
        for (int p = 1; p < parts; ++p) {
          const float* theirs = parts_sums + (p * groups + group - groups) * kWarpSums + lane;
#pragma unroll
          for (int i = 0; i < kRowTiles * 2 * 4; ++i) (&acc[0][0][0])[i] += theirs[i * 32];
        }
      }
    }
    // The share, biased and activated, in bf16: rows g and g + 8 of each tile, columns 2t, 2t + 1.
    if (part == 0) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int column = group * 16 + j * 8 + 2 * t;
        const float b0 = layer.bias[rank * width + column], b1 = layer.bias[rank * width + column + 1];
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          const int row = rt * 16 + g;
          *reinterpret_cast<uint32_t*>(share + row * kShareStride + column) =
              Pack(Activate(layer.activation, acc[rt][j][0] + b0), Activate(layer.activation, acc[rt][j][1] + b1));
          *reinterpret_cast<uint32_t*>(share + (row + 8) * kShareStride + column) =
              Pack(Activate(layer.activation, acc[rt][j][2] + b0), Activate(layer.activation, acc[rt][j][3] + b1));
        }
      }
    }
    cluster.sync();
    if (l + 2 == r.layers) break;  // the head reads this block's share where it lies
    // Every block's share into the next layer's input rows ([block][row][piece] walked), then the
    // cluster meets again before any block writes its next share over one still being read.
    const int per_row = width / 8, swapped = kBlocks * kRows * per_row;
    GridWalk at(static_cast<int>(threadIdx.x), kBlockThreads, per_row);
    for (int first = static_cast<int>(threadIdx.x); first < swapped; first += kBatch * kBlockThreads) {
      uint4 v[kBatch];
      GridWalk load = at;
#pragma unroll
      for (int u = 0; u < kBatch; ++u, load.Next()) {
        if (first + u * kBlockThreads >= swapped) continue;
        const int from = load.row / kRows, row = load.row % kRows;
        v[u] = *cluster.map_shared_rank(reinterpret_cast<const uint4*>(share + row * kShareStride + load.column * 8), from);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u, at.Next()) {
        if (first + u * kBlockThreads >= swapped) continue;
        const int from = at.row / kRows, row = at.row % kRows;
        *reinterpret_cast<uint4*>(in + row * kInStride + from * width + at.column * 8) = v[u];
      }
    }
    cluster.sync();
  }

  // The head: this block's sums over its share of the last hidden layer, per row and column.
  const MlpChainLayer& head = r.layer[r.layers - 1];
  const int width = head.k / kBlocks;
  for (int i = static_cast<int>(threadIdx.x); i < kRows * head.n; i += kBlockThreads) {
    const int row = i / head.n, column = i % head.n;
    const auto* w = static_cast<const __nv_bfloat16*>(head.w) + static_cast<int64_t>(column) * head.k + rank * width;
    float sum = 0.0f;
    for (int e8 = 0; e8 < width; e8 += 8) {
      const uint4 wv = *reinterpret_cast<const uint4*>(w + e8), xv = *reinterpret_cast<const uint4*>(share + row * kShareStride + e8);
      const uint32_t wa[4] = {wv.x, wv.y, wv.z, wv.w}, xa[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sum = fmaf(__uint_as_float(xa[e] << 16), __uint_as_float(wa[e] << 16), sum);
        sum = fmaf(__uint_as_float(xa[e] & 0xffff0000u), __uint_as_float(wa[e] & 0xffff0000u), sum);
      }
    }
    sums[row * kHeadColumns + column] = sum;
  }
  cluster.sync();
  // Rows rank, rank + kBlocks, ...: the blocks' sums in rank order, the bias, the activation.
  if (static_cast<int>(threadIdx.x) < kRows / kBlocks * head.n) {
    const int row = rank + kBlocks * (static_cast<int>(threadIdx.x) / head.n), column = static_cast<int>(threadIdx.x) % head.n;
    float sum = 0.0f;
    for (int from = 0; from < kBlocks; ++from) sum += *cluster.map_shared_rank(sums + row * kHeadColumns + column, from);
    const float y = Activate(head.activation, sum + head.bias[column]);
    if (first_row + row < r.m) {
      const int64_t at = (first_row + row) * head.n + column;
      if (r.out) r.out[at] = y;
      if (r.out_bf16) static_cast<__nv_bfloat16*>(r.out_bf16)[at] = __float2bfloat16_rn(y);
    }
  }
  cluster.sync();
#endif
}

cudaLaunchAttribute ClusterOfBlocks() {
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = kBlocks, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
  return cluster;
}

// The clusters the device runs at once (the kernel's shared memory allowed first, once); zero
// where it cannot run.
int ClustersAtOnce() {
  static const int clusters = [] {
    if (HopperSmCount() == 0) return 0;
    if (cudaFuncSetAttribute(MlpChainKernelImpl, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    cudaLaunchAttribute cluster = ClusterOfBlocks();
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(kBlocks);
    config.blockDim = dim3(kBlockThreads);
    config.dynamicSmemBytes = kSmemBytes;
    config.attrs = &cluster;
    config.numAttrs = 1;
    int count = 0;
    if (cudaOccupancyMaxActiveClusters(&count, MlpChainKernelImpl, &config) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return count;
  }();
  return clusters;
}

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool MlpChainFits(const MlpChainRun& r) {
  if (!chain_on.load(std::memory_order_relaxed) || r.layers < 2 || r.layers > kMlpChainKernelLayers || r.m < 1) return false;
  if (!r.x || !Aligned(r.x) || (!r.out && !r.out_bf16)) return false;
  if (r.layer[0].k % kChunk != 0 || r.layer[0].k > kMaxK) return false;
  for (int l = 0; l < r.layers; ++l) {
    const MlpChainLayer& layer = r.layer[l];
    if (!layer.w || !layer.bias || !Aligned(layer.w) || (l > 0 && layer.k != r.layer[l - 1].n)) return false;
    const bool head = l + 1 == r.layers;
    // A hidden share of 16, 32 or 64 columns: 1, 2 or 4 groups of 16, which divide the warps.
    const int share = layer.n / kBlocks;
    if (head ? layer.n < 1 || layer.n > kHeadColumns : layer.n % kBlocks != 0 || (share != 16 && share != 32 && share != 64)) return false;
    if (!head && layer.k % kChunk != 0) return false;
  }
  const int clusters = ClustersAtOnce();
  return clusters > 0 && (r.m + kRows - 1) / kRows <= clusters;
}

Status MlpChainKernel(cudaStream_t stream, const MlpChainRun& r) {
  if (!MlpChainFits(r)) return Internal("a chain the MLP chain kernel does not take");
  const dim3 grid(static_cast<unsigned>((r.m + kRows - 1) / kRows * kBlocks));
  const cudaLaunchAttribute cluster = ClusterOfBlocks();
  const cudaError_t launched = LaunchDependent(MlpChainKernelImpl, grid, dim3(kBlockThreads), kSmemBytes, stream, &cluster, r);
  chain_runs.fetch_add(1, std::memory_order_relaxed);
  return Check(launched, "MlpChainKernel");
}

void PrepareMlpChain() { ClustersAtOnce(); }

void EnableMlpChainKernel(bool on) { chain_on.store(on, std::memory_order_relaxed); }

int64_t MlpChainKernelRuns() { return chain_runs.load(std::memory_order_relaxed); }

}  // namespace rankd::cuda
