// What the two TargetAttention kernel files share (model/ops/target_attention.h):
// attention.cu has the fp32 tile kernel, the sum of the tiles and the host side;
// attention_mma.cu has the bf16 tile kernel on the tensor cores. Device-code header.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/ops/target_attention.h"

namespace rankd::cuda::attention {

using target_attention::kFirstLayerInput;
using target_attention::kMaxLayers;
using target_attention::kMaxWidth;
using target_attention::kTileRows;

constexpr int kWarp = 32;

struct Layer {
  const float* weight;  // [in, out]
  const float* bias;    // [out] or null
  int out;
};

struct Params {
  const float *keys, *query, *key_proj, *query_proj, *cross, *mask;
  const int64_t* key_rows;
  Layer layers[kMaxLayers];
  int layer_count;
  int64_t users, length;
  int dim, width, widest, tiles;
  float* sums;  // [candidates, tiles, dim]: each tile's sum (the output itself with one tile)
  int* error;
  int step;
};

__device__ inline float Relu(float x) { return x > 0.0f ? x : 0.0f; }

// The bf16 kernel (attention_mma.cu): the shared memory a block needs for p; allowing its builds
// up to `bytes` per block; launching it for `candidates` on `stream` (writes p.sums), given the
// device's multiprocessors.
int MmaSharedBytes(const Params& p);
cudaError_t AllowMmaSharedMemory(int bytes);
void LaunchMmaTiles(const Params& p, int64_t candidates, int multiprocessors, cudaStream_t stream);

}  // namespace rankd::cuda::attention
