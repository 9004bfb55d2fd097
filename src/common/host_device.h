// RANKD_HOST_DEVICE: a function that host code and CUDA kernels share (__host__ __device__ under
// nvcc, nothing elsewhere).
#pragma once

#if defined(__CUDACC__)
#define RANKD_HOST_DEVICE __host__ __device__
#else
#define RANKD_HOST_DEVICE
#endif
