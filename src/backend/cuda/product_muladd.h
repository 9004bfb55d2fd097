// Products with a multiply-add epilogue (FuseProductMulAdds, compile/passes.h): out = m * (A·B +
// bias) + c, m and c of the product's shape. DCNv2's cross layer x0 * (U v + b) + x: run as
// cuBLASLt's product and then a MulAdd kernel, the up-projection's result is written and read
// back, and the MulAdd is one more launch (W1 at 512 pairs on an H200: 10.4 + 5.5 µs a layer).
// With bf16-activations precision, where the cross layers' activations exist as bf16 copies
// alone (bf16_copies.h), a Hopper kernel of rankd's own (product_muladd.cu: TMA loads, wgmma,
// the epilogue on the accumulators) does both in one launch.
#pragma once

#include "backend/cuda/device.h"
#include "backend/cuda/gemm.h"

namespace rankd::cuda {

// The product g of a and b into out (alpha, beta, bias and g.epilogue as Sgemm takes them), then
// out = m * out + c, and ctx.bf16_out (when set) the bf16 rounding of out, in place of out where
// ctx.bf16_out_alone. m and c are read from their bf16 copies where ctx names them (ctx.bf16_b for
// m, ctx.bf16_c for c). One kernel where the product fits it (an sm_90
// device, bf16 copies for A, the weight, m, c and the result, n a multiple of 128, k of 64; see
// FusedOperandsOf in product_muladd.cu), else two.
Status ProductMulAdd(DeviceContext& ctx, const GemmShape& g, const float* a, const float* b, float* out, float alpha,
                     float beta, const float* bias, const float* m, const float* c);

// Sets the fused kernel up (its shared memory limit, the tensor-map encoder) once per process.
// Executors call it as they are created: inside a stream capture those calls would fail, and the
// kernel would then stay off.
void PrepareProductMulAdd();

// For tests: false runs every such product as two kernels (the product, then the MulAdd).
void EnableFusedProductMulAdd(bool on);
// For tests: how many products this process has run as the fused kernel.
int64_t FusedProductMulAddRuns();
// For tests: how many of those read c as m (one load of the tile where c is m: a DCN's first layer).
int64_t FusedProductMulAddRunsWithCAsM();

}  // namespace rankd::cuda
