// bf16 tensor-core helpers for rankd's own matrix kernels (attention_mma.cu). Device-only header.
//
// mma.sync m16n8k16 with bf16 operands and fp32 accumulators (PTX ISA, "Matrix Fragments for
// mma.m16n8k16"); lane = 4 g + t:
//   A 16x16: a[0] row g, cols 2t and 2t+1; a[1] row g+8, the same cols; a[2], a[3] as a[0], a[1]
//            with cols 2t+8 and 2t+9 (each a register of two bf16, the lower column low);
//   B 16x8:  b0 rows 2t and 2t+1 of column g; b1 rows 2t+8 and 2t+9;
//   C 16x8:  c[0], c[1] row g, cols 2t and 2t+1; c[2], c[3] row g+8.
// So with A row-major and B stored by columns ([n][k], as a weight's [N, K] rows), every register
// is one aligned 32-bit load.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace rankd::cuda {

__device__ inline uint32_t Pack(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ inline uint32_t Load32(const __nv_bfloat16* at) { return *reinterpret_cast<const uint32_t*>(at); }

__device__ inline void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace rankd::cuda
