// Products with a multiply-add epilogue (FuseProductMulAdds, compile/passes.h): out = m * act(A·B
// + bias) + c, m and c of the product's shape. DCNv2's cross layer x0 * (W h + b) + x: run as the
// product and then a MulAdd kernel in place, it writes the product and reads it back (at W1's
// 512 pairs the three MulAdds took 26 of a batch's 155 µs on an H200, docs/benchmarks.md); the
// fused kernel applies the epilogue to each tile of the product while it is in registers.
//
// Not yet run on a GPU: RANKD_CUDA_PRODUCT_MULADD chooses, and by default the CUDA backend does
// not take the fusion at all (Backend::TakesProductMulAdds), so models load and run as before.
//   unset or 0  off: the pass leaves the MulAdds to their own kernel
//   1           the pass runs; each fused product is the product and then MulAddSameShape
//   fused       the pass runs; one kernel (below) wherever it takes the product
#pragma once

#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/gemm.h"

namespace rankd::cuda {

enum class ProductMulAddMode { kOff, kTwoKernels, kFused };

// RANKD_CUDA_PRODUCT_MULADD's choice, or the one SetProductMulAddMode made.
ProductMulAddMode CurrentProductMulAddMode();
// For tests: overrides the environment for products run from now on.
void SetProductMulAddMode(ProductMulAddMode mode);

// The product g of a and b into out (alpha, beta, bias and g.epilogue as Sgemm takes them), then
// out = m * out + c, and `copy` (when set) the bf16 rounding of out: in one kernel when the mode
// is kFused and the product fits it (bf16 precision, one product of at least 16 rows with a
// weight matrix whose [N, K] bf16 copy the model holds, alpha 1 and no C but a bias row, K a
// multiple of 8, N even, the pointers aligned), else as two.
Status ProductMulAdd(DeviceContext& ctx, const GemmShape& g, const float* a, const float* b,
                     float* out, float alpha, float beta, const float* bias, const float* m,
                     const float* c, void* copy);

}  // namespace rankd::cuda
