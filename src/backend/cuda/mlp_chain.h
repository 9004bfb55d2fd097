// An MLP's last layers and its head in one kernel (mlp_chain.cu), for batches of up to a few
// hundred rows. W1's top MLP ends 1,024 → 512 → 256 → 1: at 512 pairs three products of 5.4, 3.9
// and 3.5 µs (docs/benchmarks.md), each mostly launch, ramp and tail for well under a µs of
// arithmetic. Here a cluster of eight blocks takes 48 rows through every layer: each
// block computes its share of a hidden layer's columns (mma.sync, the weight's rows streamed
// through shared memory by bulk copies), the blocks swap their shares through distributed shared
// memory, and the head's sums over each block's columns meet in one block. Hidden results stay
// bf16 on chip, as the unfused products' bf16 copies are.
#pragma once

#include <cstdint>

#include "backend/activation.h"
#include "backend/cuda/device.h"

namespace rankd::cuda {

constexpr int kMlpChainKernelLayers = 4;

struct MlpChainLayer {
  const void* w = nullptr;        // [n, k] bf16 rows (a weight's [N, K])
  const void* w_tiled = nullptr;  // a hidden layer's weight as MlpChainTileWeight lays it out
  const float* bias = nullptr;    // [n]
  int n = 0, k = 0;
  Activation activation = Activation::kNone;
};

// y = layer_last(... layer_0(x)), layer_l(v) = act_l(v · W_lᵀ + b_l), every hidden result rounded
// to bf16 (as the products' bf16 copies round them), the sums in fp32.
struct MlpChainRun {
  const void* x = nullptr;  // [m, layer[0].k]: bf16 when x_bf16, else fp32 (rounded to bf16 as read)
  bool x_bf16 = false;
  int64_t m = 0;
  int layers = 0;
  MlpChainLayer layer[kMlpChainKernelLayers];
  float* out = nullptr;   // [m, layer[layers - 1].n] fp32, or null (then the bf16 copy alone)
  void* out_bf16 = nullptr;  // its bf16 copy, or null
};

// Whether the kernel takes r: an sm_90 device; two to four layers; hidden widths of 128, 256 or
// 512 (a block's share of 16, 32 or 64 columns) over a k that is a multiple of 128, up to 1,024;
// a head of 1 to 8 columns; x and the weights 16-byte aligned; and no more clusters than the
// device runs at once (more rows: cuBLASLt's tiles reuse each weight across more rows than a
// cluster's 48 do).
bool MlpChainFits(const MlpChainRun& r);

Status MlpChainKernel(cudaStream_t stream, const MlpChainRun& r);

// A hidden layer's weight as the kernel streams it: for each block of a cluster and each piece of
// k it takes at once, the block's rows of that piece, padded as the kernel's shared memory holds
// them, one after another, so that a piece is one bulk copy (copies of a row each were bound by
// the copy unit's rate: 1.4 µs for 16 KiB in 64 rows). Elements of the layout for an [n, k]
// weight, and the layout made from its bf16 [n, k] rows (n a multiple of 8 and k of 128).
int64_t MlpChainTiledElements(int64_t n, int64_t k);
void MlpChainTileWeight(const uint16_t* rows, int64_t n, int64_t k, uint16_t* tiled);

// Sets the kernel up (its shared memory, the clusters that fit at once) outside any capture.
void PrepareMlpChain();

// For tests: false runs every chain layer by layer (RANKD_MLP_CHAIN=0 too); how many chains ran
// as this kernel.
void EnableMlpChainKernel(bool on);
int64_t MlpChainKernelRuns();

}  // namespace rankd::cuda
