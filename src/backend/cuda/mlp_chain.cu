// The MLP chain kernel (mlp_chain.h). A cluster of kBlocks blocks takes kRows rows. Block `rank`
// owns columns [rank · S, rank · S + S) of each hidden layer (S = n / kBlocks): its eight warps
// multiply the layer's input rows, held whole in shared memory, by those columns' weight rows,
// which bulk copies (the TMA unit, a row a thread) stream through kStages stages of kChunk k
// each, one stream across the layers (the first stages are requested before the kernel waits for
// the one before it). A layer's share goes to shared memory in bf16, and once the cluster has
// met every block pushes it, one bulk copy each, into every block's input for the next layer
// (the shares one after another), counted on the receiver's barrier. The head (at most kHeadColumns columns) needs no swap: each
// block sums over its own share of the last hidden layer, the cluster meets, and each block adds
// the blocks' sums for its rows (stored into its shared memory by the others) in rank order. No
// block reads another's shared memory after that last meeting, so none waits for the others to leave.
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
// A row of a block's share of a hidden layer. A later layer's input is the kBlocks shares one
// after another (each kRows rows of this stride), so that a share crosses in one bulk copy.
constexpr int kShareStride = kMaxShare + 32;
// A warp's sums: its kRowTiles × 2 tiles of 16 × 8, four floats a lane each.
constexpr int kWarpSums = kRowTiles * 2 * 4 * 32;
constexpr int kInBytes = kRows * kInStride * 2;
constexpr int kStageBytes = kMaxShare * kStageStride * 2;
constexpr int kShareBytes = kRows * kShareStride * 2;
constexpr int kPartBytes = (kWarps - 1) * kWarpSums * 4;  // the sums of warps past the first part of k
constexpr int kSumBytes = kRows * kHeadColumns * 4;
constexpr int kBarrierBytes = (kStages + 2) * 8;
// The constants a block reads outside its products, loaded while the kernel before finishes:
// its share of each hidden layer's bias, the head's weights for its share, and the head's bias.
constexpr int kConstantFloats = (kMlpChainKernelLayers - 1) * kMaxShare + kHeadColumns * kMaxShare + kHeadColumns;
constexpr int kSmemBytes = kInBytes + kStages * kStageBytes + kShareBytes + kPartBytes + kSumBytes + kConstantFloats * 4 + kBarrierBytes;
static_assert(kRows % 16 == 0 && kRows % kBlocks == 0, "row tiles of 16, and the head's rows shared by the blocks");
static_assert(kSmemBytes <= 227 * 1024, "an sm_90 block's shared memory");
static_assert(kBlocks * kShareBytes <= kInBytes, "a later layer's input, its blocks' shares, where the first's rows were");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// Bulk copies (the TMA unit's, no tensor map): `bytes` (a multiple of 16, both ends 16-byte
// aligned) from global memory into this block's shared memory, or from this block's shared memory
// into block `rank`'s, counted on an mbarrier beside the destination.
__device__ __forceinline__ void BulkLoad(void* to, const void* from, int bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(SmemAddress(to)),
               "l"(from), "r"(bytes), "r"(SmemAddress(bar))
               : "memory");
}
__device__ __forceinline__ uint32_t InBlock(const void* p, int rank) {
  uint32_t remote = 0;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(SmemAddress(p)), "r"(rank));
  return remote;
}
__device__ __forceinline__ void BulkPush(const void* from, void* to, int rank, int bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(InBlock(to, rank)),
               "r"(SmemAddress(from)), "r"(bytes), "r"(InBlock(bar, rank))
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Until this thread's pushes have read their sources.
__device__ __forceinline__ void PushesRead() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }

#endif

__global__ void __launch_bounds__(kBlockThreads, 1) MlpChainKernelImpl(const __grid_constant__ MlpChainRun r) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  extern __shared__ __align__(16) unsigned char smem[];
  auto* in = reinterpret_cast<__nv_bfloat16*>(smem);
  auto* stages = reinterpret_cast<__nv_bfloat16*>(smem + kInBytes);
  auto* share = reinterpret_cast<__nv_bfloat16*>(smem + kInBytes + kStages * kStageBytes);
  auto* parts_sums = reinterpret_cast<float*>(smem + kInBytes + kStages * kStageBytes + kShareBytes);
  auto* sums = reinterpret_cast<float*>(smem + kInBytes + kStages * kStageBytes + kShareBytes + kPartBytes);  // [block][row / kBlocks][column]
  auto* biases = reinterpret_cast<float*>(smem + kInBytes + kStages * kStageBytes + kShareBytes + kPartBytes + kSumBytes);
  float* head_weights = biases + (kMlpChainKernelLayers - 1) * kMaxShare;
  float* head_bias = head_weights + kHeadColumns * kMaxShare;
  auto* full = reinterpret_cast<uint64_t*>(biases + kConstantFloats);
  uint64_t* input_bar = full + kStages;  // the first layer's input rows; then every block's shares
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t first_row = static_cast<int64_t>(blockIdx.x / kBlocks) * kRows;
  const int valid_rows = static_cast<int>(r.m - first_row < kRows ? r.m - first_row : kRows);

  // Chunk q of the stream of the hidden layers' weights (layer by layer, kChunk of k each) into
  // stage q % kStages, a share's row a thread, counted on that stage's barrier; a q past the
  // stream requests nothing.
  auto request = [&](int q) {
    int c = q;
    for (int l = 0; l + 1 < r.layers; ++l) {
      const MlpChainLayer& layer = r.layer[l];
      const int chunks = layer.k / kChunk;
      if (c >= chunks) {
        c -= chunks;
        continue;
      }
      const int width = layer.n / kBlocks, bytes = width * kStageStride * 2;
      if (tid == 0) {
        uint64_t* bar = &full[q % kStages];
        BarrierExpect(bar, bytes);
        const auto* piece = static_cast<const __nv_bfloat16*>(layer.w_tiled) + static_cast<int64_t>(rank * chunks + c) * width * kStageStride;
        BulkLoad(stages + (q % kStages) * (kStageBytes / 2), piece, bytes, bar);
      }
      return;
    }
  };

  if (tid == 0) {
    for (int s = 0; s < kStages + 1; ++s) BarrierInit(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // The weights are constants: their first stages may be requested before the inputs are ready,
  // and the biases and the head's weights read meanwhile.
  for (int q = 0; q < kStages - 1; ++q) request(q);
  const MlpChainLayer& head = r.layer[r.layers - 1];
  const int head_width = head.k / kBlocks;
  for (int l = 0; l + 1 < r.layers; ++l) {
    const int width = r.layer[l].n / kBlocks;
    if (tid < width) biases[l * kMaxShare + tid] = r.layer[l].bias[rank * width + tid];
  }
  for (int i = tid; i < head.n * head_width; i += kBlockThreads) {
    const int column = i / head_width, e = i % head_width;
    head_weights[column * kMaxShare + e] = __bfloat162float(static_cast<const __nv_bfloat16*>(head.w)[static_cast<int64_t>(column) * head.k + rank * head_width + e]);
  }
  if (tid < head.n) head_bias[tid] = head.bias[tid];
  WaitForPrevious();

  // The first layer's input rows in bf16, zeros past the batch: a bf16 copy by bulk copies, a row
  // a thread; fp32 converted kBatch pieces a thread at a time (every load before any store).
  const int k0 = r.layer[0].k, per_row = k0 / 8;
  for (int i = valid_rows * per_row + tid; i < kRows * per_row; i += kBlockThreads) {
    *reinterpret_cast<uint4*>(in + i / per_row * kInStride + i % per_row * 8) = make_uint4(0, 0, 0, 0);
  }
  if (r.x_bf16) {
    if (tid == 0) BarrierExpect(input_bar, valid_rows * k0 * 2);
    if (tid < valid_rows) BulkLoad(in + tid * kInStride, static_cast<const __nv_bfloat16*>(r.x) + (first_row + tid) * k0, k0 * 2, input_bar);
  } else {
    const int pieces = valid_rows * per_row;
    for (int first = tid; first < pieces; first += kBatch * kBlockThreads) {
      uint4 v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = first + u * kBlockThreads;
        if (i >= pieces) continue;
        const float* x = static_cast<const float*>(r.x) + (first_row + i / per_row) * k0 + i % per_row * 8;
        const float4 a = *reinterpret_cast<const float4*>(x), b = *reinterpret_cast<const float4*>(x + 4);
        v[u] = make_uint4(Pack(a.x, a.y), Pack(a.z, a.w), Pack(b.x, b.y), Pack(b.z, b.w));
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = first + u * kBlockThreads;
        if (i < pieces) *reinterpret_cast<uint4*>(in + i / per_row * kInStride + i % per_row * 8) = v[u];
      }
    }
    if (tid == 0) BarrierArrive(input_bar);
  }
  BarrierWait(input_bar, 0);
  __syncthreads();

  // The hidden layers. A share of `width` columns is width / 16 groups of 16; warp w takes group
  // w % groups for all kRows rows (kRowTiles × 2 tiles of 16 × 8, each A piece read once for two
  // tiles and each B piece for kRowTiles), and the k steps of 32 numbered w / groups modulo parts.
  // The parts' sums then meet in the first part's warps, in part order.
  int q = 0, swaps = 0;
  for (int l = 0; l + 1 < r.layers; ++l) {
    const MlpChainLayer& layer = r.layer[l];
    const int width = layer.n / kBlocks, groups = width / 16, parts = kWarps / groups, k = layer.k;
    const int group = warp % groups, part = warp / groups;
    float acc[kRowTiles][2][4] = {};
    // The input's rows: the first layer's whole; a later one's in segments of the last width.
    const int row_stride = l == 0 ? kInStride : kShareStride;
    const int segment = l == 0 ? kMaxK : r.layer[l - 1].n / kBlocks, segment_stride = kRows * kShareStride;
    const __nv_bfloat16* a_row = in + g * row_stride + 8 * t;
    for (int c = 0; c < k / kChunk; ++c, ++q) {
      request(q + kStages - 1);
      BarrierWait(&full[q % kStages], (q / kStages) & 1);
      const __nv_bfloat16* b_row = stages + (q % kStages) * (kStageBytes / 2) + (group * 16 + g) * kStageStride + 8 * t;
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        if (((c * kSteps + s) & (parts - 1)) != part) continue;  // parts: 2, 4 or 8
        // Every operand loaded, then the first halves of k and the second: no product waits on
        // the one just before it.
        const uint4 b0 = *reinterpret_cast<const uint4*>(b_row + s * 32);
        const uint4 b1 = *reinterpret_cast<const uint4*>(b_row + 8 * kStageStride + s * 32);
        const int k_at = c * kChunk + s * 32;
        const __nv_bfloat16* a_at = a_row + k_at / segment * segment_stride + k_at % segment;
        uint4 lo[kRowTiles], hi[kRowTiles];
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          lo[rt] = *reinterpret_cast<const uint4*>(a_at + rt * 16 * row_stride);
          hi[rt] = *reinterpret_cast<const uint4*>(a_at + (rt * 16 + 8) * row_stride);
        }
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          const uint32_t first[4] = {lo[rt].x, hi[rt].x, lo[rt].y, hi[rt].y};
          Mma(acc[rt][0], first, b0.x, b0.y);
          Mma(acc[rt][1], first, b1.x, b1.y);
        }
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          const uint32_t second[4] = {lo[rt].z, hi[rt].z, lo[rt].w, hi[rt].w};
          Mma(acc[rt][0], second, b0.z, b0.w);
          Mma(acc[rt][1], second, b1.z, b1.w);
        }
      }
      __syncthreads();  // the stage is free for the request kStages - 1 chunks on
    }
    if (parts > 1) {
      if (part > 0) {
        float* mine = parts_sums + (warp - groups) * kWarpSums + lane;
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
        const float b0 = biases[l * kMaxShare + column], b1 = biases[l * kMaxShare + column + 1];
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
    if (l + 2 == r.layers) {  // the head reads this block's share where it lies
      __syncthreads();
      break;
    }
    // Every block pushes its share into every block's input for the next layer (segment `rank`),
    // once all have finished reading it; each waits for the kBlocks shares on its input barrier.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the share's stores, seen by the copies
    if (tid == 0) BarrierExpect(input_bar, kBlocks * kShareBytes);
    cluster.sync();
    if (tid < kBlocks) BulkPush(share, in + rank * kRows * kShareStride, tid, kShareBytes, input_bar);
    PushesRead();  // the share may be written again once every block has passed the next stage
    ++swaps;
    BarrierWait(input_bar, swaps & 1);
  }

  // The head: this block's sums over its share of the last hidden layer, per row and column.
  for (int i = tid; i < kRows * head.n; i += kBlockThreads) {
    const int row = i / head.n, column = i % head.n;
    const float* w = head_weights + column * kMaxShare;
    float sum = 0.0f;
    for (int e8 = 0; e8 < head_width; e8 += 8) {
      const uint4 xv = *reinterpret_cast<const uint4*>(share + row * kShareStride + e8);
      const uint32_t xa[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sum = fmaf(__uint_as_float(xa[e] << 16), w[e8 + 2 * e], sum);
        sum = fmaf(__uint_as_float(xa[e] & 0xffff0000u), w[e8 + 2 * e + 1], sum);
      }
    }
    // Into the block that finishes the row: its sums[rank][row / kBlocks][column].
    float* owner = cluster.map_shared_rank(sums, row % kBlocks);
    owner[(rank * (kRows / kBlocks) + row / kBlocks) * kHeadColumns + column] = sum;
  }
  cluster.sync();
  // Rows rank, rank + kBlocks, ...: the blocks' sums in rank order, the bias, the activation.
  if (tid < kRows / kBlocks * head.n) {
    const int row = rank + kBlocks * (tid / head.n), column = tid % head.n;
    float sum = 0.0f;
    for (int from = 0; from < kBlocks; ++from) sum += sums[(from * (kRows / kBlocks) + row / kBlocks) * kHeadColumns + column];
    const float y = Activate(head.activation, sum + head_bias[column]);
    if (first_row + row < r.m) {
      const int64_t at = (first_row + row) * head.n + column;
      if (r.out) r.out[at] = y;
      if (r.out_bf16) static_cast<__nv_bfloat16*>(r.out_bf16)[at] = __float2bfloat16_rn(y);
    }
  }
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
    if (!head && (layer.k % kChunk != 0 || !layer.w_tiled || !Aligned(layer.w_tiled))) return false;
    // A later hidden layer reads its input in segments of the last share: steps of 32 within one.
    if (!head && l > 0 && r.layer[l - 1].n / kBlocks < 32) return false;
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

int64_t MlpChainTiledElements(int64_t n, int64_t k) { return n * (k / kChunk) * kStageStride; }

void MlpChainTileWeight(const uint16_t* rows, int64_t n, int64_t k, uint16_t* tiled) {
  const int64_t share = n / kBlocks, chunks = k / kChunk;
  for (int64_t rank = 0; rank < kBlocks; ++rank) {
    for (int64_t c = 0; c < chunks; ++c) {
      uint16_t* piece = tiled + (rank * chunks + c) * share * kStageStride;
      for (int64_t row = 0; row < share; ++row) {
        for (int64_t col = 0; col < kStageStride; ++col) {
          piece[row * kStageStride + col] = col < kChunk ? rows[(rank * share + row) * k + c * kChunk + col] : 0;
        }
      }
    }
  }
}

void PrepareMlpChain() { ClustersAtOnce(); }

void EnableMlpChainKernel(bool on) { chain_on.store(on, std::memory_order_relaxed); }

int64_t MlpChainKernelRuns() { return chain_runs.load(std::memory_order_relaxed); }

}  // namespace rankd::cuda
