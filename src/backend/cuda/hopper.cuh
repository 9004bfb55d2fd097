// What rankd's Hopper kernels share (product_muladd.cu, split_k_gemm.cu): TMA loads and stores
// with mbarriers, wgmma on operands in shared memory, and the tensor maps TMA reads through.
// Device functions exist in sm_90a builds only (__CUDA_ARCH_FEAT_SM90_ALL); a kernel's body is
// empty elsewhere, and HopperSmCount() keeps it from being launched.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/cuda/device.h"
#include "backend/cuda/driver_entry.h"
#include "backend/cuda/per_device.h"

namespace rankd::cuda {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ uint32_t SmemAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void BarrierInit(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddress(bar)), "r"(count));
}
__device__ __forceinline__ void BarrierExpect(uint64_t* bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddress(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void BarrierArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(SmemAddress(bar)) : "memory");
}
__device__ __forceinline__ void BarrierWait(uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(SmemAddress(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void TmaLoad(void* to, const CUtensorMap* map, int column, int row, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          SmemAddress(to)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(column), "r"(row), "r"(SmemAddress(bar))
      : "memory");
}
__device__ __forceinline__ void TmaStore(const CUtensorMap* map, int column, int row, const void* from) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(column), "r"(row), "r"(SmemAddress(from))
               : "memory");
}
// A K-major piece in shared memory as TMA wrote it with 128-byte swizzling: rows of 64 bf16,
// groups of 8 rows 1,024 bytes apart (the piece 1,024-byte aligned).
__device__ __forceinline__ uint64_t Descriptor(const void* p) {
  const uint64_t address = SmemAddress(p);
  return ((address & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}
__device__ __forceinline__ void WgmmaFence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void WgmmaCommit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// d (64 fp32 accumulators a thread: rows 16·warp + lane / 4 (+ 8), columns 8·i + 2·(lane % 4) (+ 1))
// += A (64 × 16) · B (16 × 128), both bf16 in shared memory, K-major, 128-byte swizzled.
__device__ __forceinline__ void WgmmaM64N128K16(float* d, uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(accumulate));
}

// A K-major [N, K] bf16 operand in shared memory as core matrices without swizzling: element
// (n, k) at byte ((n / 8) * (K / 8) + k / 8) * 128 + (n % 8) * 16 + (k % 8) * 2, each core
// matrix's 8 rows of 8 in 128 contiguous bytes; the descriptor of its 16 columns from k0 (a
// multiple of 16): core matrices adjacent in K 128 bytes apart (the leading offset), in N 16 K
// bytes (the stride offset).
__device__ __forceinline__ uint64_t CoreDescriptor(const void* matrix, int k0, int k_total) {
  const uint64_t address = SmemAddress(matrix) + k0 / 8 * 128;
  return ((address & 0x3FFFF) >> 4) | (uint64_t{128 >> 4} << 16) | (uint64_t(k_total / 8 * 128 >> 4) << 32);
}

// d (a warp's 16 rows of a 64 x N fp32 product: the first N / 8 of its mma.sync C fragments,
// mma.cuh) += A (64 x 16, from registers: each warp's 16 rows as an mma.sync A fragment) times B
// (16 x N, K-major core matrices in shared memory, CoreDescriptor).
template <int J>
__device__ __forceinline__ void WgmmaM64N80K16(float (&d)[J][4], const uint32_t (&a)[4], uint64_t b) {
  static_assert(J >= 10);
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39}, {%40, %41, %42, %43}, %44, p, 1, 1, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
        "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
template <int J>
__device__ __forceinline__ void WgmmaM64N48K16(float (&d)[J][4], const uint32_t (&a)[4], uint64_t b) {
  static_assert(J >= 6);
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %29, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, {%24, %25, %26, %27}, %28, p, 1, 1, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

// One stage of a consumer warpgroup's products: waits until the stage's pieces have landed
// (`full` at `parity`), then acc[r] += rows 64·r to 64·r + 63 of A's piece at `a` times W's piece at
// `w` (both K-major, 128-byte swizzled, 64 wide in k: four m64n128k16 products), the first
// overwriting acc where !accumulate. Returns with this stage's products in flight and the previous
// stage's done, so that stage may be refilled.
template <int kRowBlocks>
__device__ __forceinline__ void StageProducts(float (&acc)[kRowBlocks][64], const unsigned char* a,
                                              const unsigned char* w, uint64_t* full, int parity, bool accumulate) {
  BarrierWait(full, parity);
  WgmmaFence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int r = 0; r < kRowBlocks; ++r) {
      WgmmaM64N128K16(acc[r], Descriptor(a + r * 64 * 128 + kk * 32), Descriptor(w + kk * 32),
                      accumulate || kk > 0 ? 1 : 0);
    }
  }
  WgmmaCommit();
  WgmmaWait<1>();
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

inline PFN_cuTensorMapEncodeTiled_v12000 TensorMapEncoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode =
      DriverEntry<std::remove_pointer_t<PFN_cuTensorMapEncodeTiled_v12000>>("cuTensorMapEncodeTiled");
  return encode;
}

// A row-major [rows, columns] bf16 matrix read or written in boxes of 64 columns by box_rows
// rows, 128-byte swizzled in shared memory.
inline Status RowsMap(CUtensorMap* map, const void* p, int64_t rows, int64_t columns, int box_rows) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(columns), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(columns) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = TensorMapEncoder()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(p), dims, strides,
                                        box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return Internal("cuTensorMapEncodeTiled failed: " + std::to_string(static_cast<int>(r)));
  return Status::Ok();
}

// The SMs of an sm_90 device whose driver encodes tensor maps, or 0: another device, or a build
// without sm_90a.
inline int HopperSmCount() {
#if defined(RANKD_CUDA_SM90A)
  static PerDevice<int> per_device;
  return per_device.Get([] {
    int device = 0, major = 0, minor = 0, count = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || major != 9 ||
        minor != 0 || !TensorMapEncoder()) {
      cudaGetLastError();
      return 0;
    }
    return count;
  });
#else
  return 0;
#endif
}

}  // namespace rankd::cuda
