// The fused cross-layer product (product_muladd.h): out = m * (A·Wᵀ + bias) + c in bf16, A [rows, k],
// W [n, k] (the weight's bf16 rows), m, c and out [rows, n], on Hopper's tensor cores.
//
// One persistent block an SM walks 128 × 128 tiles of the output, row tile by row tile (a row
// tile's 27 column tiles for W1, so A's rows are read from L2 27 times, from memory once). Warp 8
// (of a warpgroup that gives its registers to the consumers) is the producer: its lane 0 issues
// TMA loads of A's and W's 128 × 64 pieces into four stages (mbarriers: full when the bytes have
// landed, empty when the consumers' products have read them); its lane 1 loads the tile's m into
// one of two epilogue buffers, a tile ahead, and c into one buffer as soon as the tile before's
// epilogue has read it (the room a second would take holds the fourth stage: the stages are what
// keeps the products fed). Where c is m, as in a DCN's first layer (x0 · (U v + b) + x0), it loads m alone.
// Warps 0-7 are two consumer warpgroups running wgmma (m64n128k16, both operands from shared
// memory) into fp32 accumulators. With no more tiles than blocks both take each tile, 64 rows
// each; with more, they ping-pong: each takes every other tile whole, and one's epilogue (the
// memory-bound part) runs while the other's products do. The epilogue moves m and c from shared
// memory into the accumulators' layout with ldmatrix, rounds the product (with its bias) to bf16
// as the unfused path does, takes one bf16 fma, writes the result over m with stmatrix, and one
// thread stores the tile with TMA. TMA zero-fills rows past the end and clips them on the store.
//
// Measured against cuBLAS's product (bf16 out) and a MulAdd kernel, n = 3,456, k = 512, on an
// H200 (docs/log/benchmarks.md): 8.1 against 14.7 µs at 512 rows, 15.0 against 14.5 at 1,000, 46
// against 57 at 4,096, 297 against 385 at 32,768 (the products alone: 179 µs; the epilogue's
// traffic is not all hidden yet); with c as m and four stages, 232 against 332 at 32,768. With the
// consumers' registers raised to 232 (no spills, against 64 to 80 bytes a thread at 168): at
// 32,768 rows, 218 µs against 227 with c as m, 298 against 292 without; W1's four-in-flight
// throughput 1.2% higher, and its 512-pair median 0.137-0.138 ms against 0.147-0.154. With one
// buffer of c and four stages (c not m), 285 µs against 316 under four-in-flight load (means).
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <string>

#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/hopper.cuh"
#include "backend/cuda/per_device.h"
#include "backend/cuda/product_muladd.h"
#include "backend/cuda/small_rows_gemm.h"

namespace rankd::cuda {
namespace {

std::atomic<bool> fused_on{true};
std::atomic<int64_t> fused_runs{0};
std::atomic<int64_t> fused_runs_c_is_m{0};

constexpr int kTileM = 128, kTileN = 128, kTileK = 64;
// Two consumer warpgroups and a producer warpgroup, of which one warp works. Registers are handed
// out a warpgroup at a time (168 a thread for three: the consumers spilled), so the producers give
// most of theirs up (setmaxnreg) and the consumers, who hold a 128 × 128 tile's fp32 sums, take them.
constexpr int kConsumerThreads = 256, kBlockThreads = kConsumerThreads + 128;
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;
// setmaxnreg only moves registers within the block's allocation, so the consumers' rise has to fit
// in what the producers give up (or their setmaxnreg waits for ever): it does from the registers a
// thread that the block's 65,536 allow in steps of 8, 168, which ptxas gives every variant (`-Xptxas -v`).
constexpr int kLaunchRegisters = 65536 / kBlockThreads / 8 * 8;
static_assert(128 * (kLaunchRegisters - kProducerRegisters) >= 2 * 128 * (kConsumerRegisters - kLaunchRegisters));
constexpr int kPieceBytes = kTileM * kTileK * 2;  // a stage's piece of A or W; a 64-column box of m or c
constexpr int kStageBytes = 2 * kPieceBytes;
constexpr int kTileBytes = kTileM * kTileN * 2;  // m's (then the output's) tile, or c's
// Four stages: m's tile has two epilogue buffers, c's one (none where c is m, as in a DCN's first
// layer), and the room that leaves holds a fourth stage. A layer of W1 at 32,768 rows with c as m:
// 232 µs against 257 with three stages, in the standalone program (five, which do not divide W1's
// eight steps of k, took 279). With c not m and two buffers of c, there was room for three stages:
// 316 µs a layer against 285 with one buffer and four (means under four-in-flight load).
constexpr int kStages = 4;
constexpr int SmemBytes(bool c_is_m) {
  return kStages * kStageBytes + (c_is_m ? 2 : 3) * kTileBytes + 1024 + 256;  // + alignment, barriers
}

struct Maps {
  CUtensorMap a, w, m, c, out;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// Byte offset of element (row, column) in a 128-column tile kept as two 64-column boxes that TMA
// wrote with 128-byte swizzling (16-byte chunk j of row r at chunk j ^ (r % 8)): a warp's reads
// of 8 rows × 16 bytes then fall in 32 different banks.
__device__ __forceinline__ int SwizzledOffset(int row, int column) {
  return (column / 64) * kPieceBytes + row * 128 + ((((column % 64) / 8) ^ (row % 8)) * 16) + (column % 8) * 2;
}

// Four 8 × 8 bf16 pieces of shared memory, one row address a lane, to and from registers.
__device__ __forceinline__ void LoadPieces(uint32_t* v, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(SmemAddress(row)));
}
__device__ __forceinline__ void StorePieces(void* row, const uint32_t* v) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(SmemAddress(row)), "r"(v[0]),
               "r"(v[1]), "r"(v[2]), "r"(v[3])
               : "memory");
}
__device__ __forceinline__ __nv_bfloat162 Bf16Pair(uint32_t bits) {
  __nv_bfloat162 v;
  memcpy(&v, &bits, sizeof v);
  return v;
}
__device__ __forceinline__ uint32_t Bits(__nv_bfloat162 v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return bits;
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// kPingPong false: both consumer warpgroups take each tile, 64 rows each (when the tiles are no
// more than the blocks). true: each warpgroup takes every other tile of its block, all 128 rows, so
// that one's epilogue runs while the other's products do; the barrier `issued` keeps their
// products in tile order (a warpgroup starts on its tile's stages only once the other has issued
// the tile before, so the stages' barriers are never two phases behind the one it waits for).
template <bool kPingPong, bool kCIsM>
__global__ void __launch_bounds__(kBlockThreads, 1)
    ProductMulAddKernel(const __grid_constant__ Maps maps, const float* bias, int rows, int n, int k) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kGroupsOnATile = kPingPong ? 1 : 2;
  constexpr int kRowBlocks = kPingPong ? 2 : 1;  // the 64-row blocks of a tile a warpgroup takes
  constexpr int kTileThreads = 128 * kGroupsOnATile;
  extern __shared__ unsigned char smem_raw[];
  auto* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  unsigned char* stages = smem;
  unsigned char* epilogue = smem + kStages * kStageBytes;  // m's two buffers, then c's one (unless c is m)
  unsigned char* tile_c = epilogue + 2 * kTileBytes;
  auto* full = reinterpret_cast<uint64_t*>(epilogue + (kCIsM ? 2 : 3) * kTileBytes);
  uint64_t* empty = full + kStages;
  uint64_t* epilogue_full = empty + kStages;
  uint64_t* epilogue_empty = epilogue_full + 2;
  uint64_t* issued = epilogue_empty + 2;  // ping-pong: a warpgroup's products of its tile issued
  // c's buffer: c_full[i % 2] when tile i's c has landed (two barriers, so that a ping-pong
  // warpgroup ahead of the other never takes the other's tile's phase for its own), c_empty once
  // tile i's epilogue has read it (then tile i + 1's c loads).
  uint64_t* c_full = issued + 2;
  uint64_t* c_empty = c_full + 2;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      BarrierInit(&full[s], 1);
      BarrierInit(&empty[s], 4 * kGroupsOnATile);
    }
    for (int b = 0; b < 2; ++b) {
      BarrierInit(&epilogue_full[b], 1);
      BarrierInit(&epilogue_empty[b], 1);
      BarrierInit(&issued[b], 4);
    }
    BarrierInit(&c_full[0], 1);
    BarrierInit(&c_full[1], 1);
    BarrierInit(c_empty, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int column_tiles = n / kTileN, tiles = column_tiles * ((rows + kTileM - 1) / kTileM), k_steps = k / kTileK;
  const int first = static_cast<int>(blockIdx.x), step = static_cast<int>(gridDim.x);
  if (warp >= kConsumerThreads / 32) {  // the producers' warpgroup: two lanes of its first warp work
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegisters));
    const bool loader = warp == kConsumerThreads / 32;
    if (loader && lane == 0) {  // A's and W's pieces
      // The weight's pieces of the first tile's first stages load while the kernel before
      // finishes (dependent_launch.cuh).
      const int early = first < tiles ? min(kStages, k_steps) : 0;
      for (int it = 0; it < early; ++it) {
        BarrierExpect(&full[it], kStageBytes);
        TmaLoad(stages + it * kStageBytes + kPieceBytes, &maps.w, it * kTileK, first % column_tiles * kTileN,
                &full[it]);
      }
      WaitForPrevious();
      int it = 0;
      for (int tile = first; tile < tiles; tile += step) {
        const int m0 = tile / column_tiles * kTileM, n0 = tile % column_tiles * kTileN;
        for (int t = 0; t < k_steps; ++t, ++it) {
          const int s = it % kStages;
          if (it >= early) {
            if (it >= kStages) BarrierWait(&empty[s], (it / kStages - 1) & 1);
            BarrierExpect(&full[s], kStageBytes);
            TmaLoad(stages + s * kStageBytes + kPieceBytes, &maps.w, t * kTileK, n0, &full[s]);
          }
          TmaLoad(stages + s * kStageBytes, &maps.a, t * kTileK, m0, &full[s]);
        }
      }
    } else if (loader && lane == 1) {  // the epilogue's m and c, a tile ahead
      WaitForPrevious();
      int i = 0;
      for (int tile = first; tile < tiles; tile += step, ++i) {
        const int m0 = tile / column_tiles * kTileM, n0 = tile % column_tiles * kTileN, b = i % 2;
        if (i >= 2) BarrierWait(&epilogue_empty[b], (i / 2 - 1) & 1);
        unsigned char* tile_m = epilogue + b * kTileBytes;
        BarrierExpect(&epilogue_full[b], kTileBytes);
        for (int h = 0; h < 2; ++h) TmaLoad(tile_m + h * kPieceBytes, &maps.m, n0 + h * 64, m0, &epilogue_full[b]);
        if (!kCIsM) {
          if (i >= 1) BarrierWait(c_empty, (i - 1) & 1);
          BarrierExpect(&c_full[b], kTileBytes);
          for (int h = 0; h < 2; ++h) TmaLoad(tile_c + h * kPieceBytes, &maps.c, n0 + h * 64, m0, &c_full[b]);
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegisters));
  WaitForPrevious();
  const int group = warp / 4;
  const int group_row = kPingPong ? 0 : group * 64;  // the warpgroup's first row in its tile
  for (int i = kPingPong ? group : 0; first + i * step < tiles; i += kPingPong ? 2 : 1) {
    const int tile = first + i * step, m0 = tile / column_tiles * kTileM, n0 = tile % column_tiles * kTileN;
    if (kPingPong && i > 0) BarrierWait(&issued[1 - group], ((i - 1) / 2) & 1);
    float acc[kRowBlocks][64];
    int it = i * k_steps;
    for (int t = 0; t < k_steps; ++t, ++it) {
      const unsigned char* stage = stages + it % kStages * kStageBytes;
      StageProducts(acc, stage + group_row * 128, stage + kPieceBytes, &full[it % kStages], (it / kStages) & 1, t > 0);
      if (t > 0 && lane == 0) BarrierArrive(&empty[(it - 1) % kStages]);  // the previous step's stage is free
    }
    if (kPingPong && lane == 0) BarrierArrive(&issued[group]);
    WgmmaWait<0>();
    if (lane == 0) BarrierArrive(&empty[(it - 1) % kStages]);
    const int b = i % 2;
    unsigned char* tile_m = epilogue + b * kTileBytes;
    BarrierWait(&epilogue_full[b], (i / 2) & 1);
    if (!kCIsM) BarrierWait(&c_full[b], (i / 2) & 1);
    // ldmatrix/stmatrix move four 8 × 8 pieces a warp at once, in the accumulators' layout: lane
    // l addresses row l % 8 of piece l / 8, and register j of every lane holds its row l / 4,
    // columns 2·(l % 4) and + 1, of piece j. Pieces: rows (+ 0 or 8) × columns (8q or 8q + 8).
    const int piece = lane / 8;
#pragma unroll
    for (int r = 0; r < kRowBlocks; ++r) {
#pragma unroll
      for (int q = 0; q < kTileN / 8; q += 2) {
        const int at =
            SwizzledOffset(group_row + r * 64 + (warp % 4) * 16 + (piece % 2) * 8 + lane % 8, (q + piece / 2) * 8);
        uint32_t mv[4], cv[4], ov[4];
        LoadPieces(mv, tile_m + at);
        if (kCIsM) {
#pragma unroll
          for (int j = 0; j < 4; ++j) cv[j] = mv[j];
        } else {
          LoadPieces(cv, tile_c + at);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int column = (q + j / 2) * 8 + 2 * (lane % 4), e = j % 2;
          const float2 bv = bias ? __ldg(reinterpret_cast<const float2*>(bias + n0 + column)) : make_float2(0.f, 0.f);
          const float* d = &acc[r][4 * (q + j / 2) + 2 * e];
          // The product rounds to bf16 as the unfused path's product does, then one bf16 fma.
          ov[j] = Bits(__hfma2(Bf16Pair(mv[j]), __floats2bfloat162_rn(d[0] + bv.x, d[1] + bv.y), Bf16Pair(cv[j])));
        }
        StorePieces(tile_m + at, ov);
      }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the writes, visible to TMA
    asm volatile("bar.sync %0, %1;" ::"r"(1 + (kPingPong ? group : 0)), "n"(kTileThreads) : "memory");
    if (threadIdx.x % kTileThreads == 0) {
      if (!kCIsM) BarrierArrive(c_empty);  // every thread on the tile has read c
      TmaStore(&maps.out, n0, m0, tile_m);
      TmaStore(&maps.out, n0 + 64, m0, tile_m + kPieceBytes);
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // the buffer may be refilled
      BarrierArrive(&epilogue_empty[b]);
    }
  }
  if (threadIdx.x % kTileThreads == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

using Kernel = void (*)(Maps, const float*, int, int, int);

Kernel KernelFor(bool ping_pong, bool c_is_m) {
  if (c_is_m) return ping_pong ? ProductMulAddKernel<true, true> : ProductMulAddKernel<false, true>;
  return ping_pong ? ProductMulAddKernel<true, false> : ProductMulAddKernel<false, false>;
}

// The SMs of an sm_90 device (the kernel's grid) with the kernel's shared memory allowed, or 0.
int HopperSms() {
  static PerDevice<int> per_device;
  return per_device.Get([] {
    const int count = HopperSmCount();
    if (count == 0) return 0;
    for (bool c_is_m : {false, true}) {
      for (bool ping_pong : {false, true}) {
        const Kernel kernel = KernelFor(ping_pong, c_is_m);
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SmemBytes(c_is_m)) !=
            cudaSuccess) {
          cudaGetLastError();
          return 0;
        }
      }
    }
    return count;
  });
}

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

const void* CopyOf(const void* copy, const void* source, const float* value) {
  return copy && source == value ? copy : nullptr;
}

// The fused kernel's operands (the bf16 copies it reads), when g fits it: an sm_90 device and a
// build for sm_90a; bf16 operands with the weight's [N, K] bf16 copy; m, c and the result as bf16
// copies alone; more than kSmallRows rows (fewer take the few-rows kernel); n a multiple of 128 and
// k of 64; alpha 1, no C but the bias row, no activation; 16-byte aligned operands, an 8-byte
// aligned bias. rows is null where A has no bf16 copy and is converted into ctx.bf16_operands.
struct FusedOperands {
  const void* rows = nullptr;
  const void* weight = nullptr;
  const void* m = nullptr;
  const void* c = nullptr;
};

std::optional<FusedOperands> FusedOperandsOf(const DeviceContext& ctx, const GemmShape& g, const float* a,
                                             const float* b, float alpha, float beta, const float* bias, const float* m,
                                             const float* c) {
  if (!fused_on.load(std::memory_order_relaxed) || !Bf16Products(ctx.precision) || HopperSms() == 0)
    return std::nullopt;
  if (g.batch != 1 || g.trans_a || g.m <= kSmallRows || g.m > INT32_MAX || g.n % kTileN != 0 || g.n > INT32_MAX ||
      g.k % kTileK != 0 || g.k == 0 || g.k > INT32_MAX || alpha != 1.0f || beta != 0.0f ||
      ActivationOf(g.epilogue) != Activation::kNone ||
      reinterpret_cast<uintptr_t>(bias) % 8 != 0) {  // bias: read as float2
    return std::nullopt;
  }
  FusedOperands f{CopyOf(ctx.bf16_a, ctx.bf16_a_source, a), Bf16WeightRows(ctx, b, g.trans_b),
                  CopyOf(ctx.bf16_b, ctx.bf16_b_source, m), CopyOf(ctx.bf16_c, ctx.bf16_c_source, c)};
  const bool a_fits = f.rows ? Aligned(f.rows) : Bf16OperandBytes(g.m * g.k) <= ctx.bf16_operand_bytes;
  if (f.weight && Aligned(f.weight) && a_fits && f.m && Aligned(f.m) && f.c && Aligned(f.c) && ctx.bf16_out &&
      ctx.bf16_out_alone && Aligned(ctx.bf16_out) && Aligned(ctx.bf16_operands)) {
    return f;
  }
  return std::nullopt;
}

}  // namespace

void PrepareProductMulAdd() { HopperSms(); }

void EnableFusedProductMulAdd(bool on) { fused_on.store(on, std::memory_order_relaxed); }

int64_t FusedProductMulAddRuns() { return fused_runs.load(std::memory_order_relaxed); }

int64_t FusedProductMulAddRunsWithCAsM() { return fused_runs_c_is_m.load(std::memory_order_relaxed); }

Status ProductMulAdd(DeviceContext& ctx, const GemmShape& g, const float* a, const float* b, float* out, float alpha,
                     float beta, const float* bias, const float* m, const float* c) {
  const std::optional<FusedOperands> fused = FusedOperandsOf(ctx, g, a, b, alpha, beta, bias, m, c);
  if (!fused) {
    RANKD_RETURN_IF_ERROR(Sgemm(ctx, g, a, b, out, alpha, beta, bias, nullptr));
    float* result = ctx.bf16_out && ctx.bf16_out_alone ? nullptr : out;
    return MulAddArrays(ctx.stream, {m, CopyOf(ctx.bf16_b, ctx.bf16_b_source, m)}, {out, nullptr},
                        {c, CopyOf(ctx.bf16_c, ctx.bf16_c_source, c)}, result, g.m * g.n, ctx.bf16_out);
  }
  const void* rows = fused->rows;
  if (!rows) {
    RANKD_RETURN_IF_ERROR(ConvertToBf16(ctx.stream, a, ctx.bf16_operands, g.m * g.k));
    rows = ctx.bf16_operands;
  }
  Maps maps;
  RANKD_RETURN_IF_ERROR(RowsMap(&maps.a, rows, g.m, g.k, kTileM));
  RANKD_RETURN_IF_ERROR(RowsMap(&maps.w, fused->weight, g.n, g.k, kTileN));
  RANKD_RETURN_IF_ERROR(RowsMap(&maps.m, fused->m, g.m, g.n, kTileM));
  RANKD_RETURN_IF_ERROR(RowsMap(&maps.c, fused->c, g.m, g.n, kTileM));
  RANKD_RETURN_IF_ERROR(RowsMap(&maps.out, ctx.bf16_out, g.m, g.n, kTileM));
  const int64_t tiles = g.n / kTileN * ((g.m + kTileM - 1) / kTileM);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(tiles, HopperSms()));
  const float* bias_row = HasBias(g.epilogue) ? bias : nullptr;
  const auto rows_count = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const bool c_is_m = fused->c == fused->m;  // a DCN's first layer: x0 * (U v + b) + x0
  // More tiles than blocks: the ping-pong hides each epilogue behind the other warpgroup's products.
  const bool ping_pong = tiles > static_cast<int64_t>(blocks);
  const cudaError_t launched =
      LaunchDependent(KernelFor(ping_pong, c_is_m), dim3(blocks), dim3(kBlockThreads), SmemBytes(c_is_m), ctx.stream,
                      nullptr, maps, bias_row, rows_count, n, k);
  fused_runs.fetch_add(1, std::memory_order_relaxed);
  if (c_is_m) fused_runs_c_is_m.fetch_add(1, std::memory_order_relaxed);
  return Check(launched, "ProductMulAddKernel");
}

}  // namespace rankd::cuda
