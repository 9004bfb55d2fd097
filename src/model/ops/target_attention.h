// rankd's TargetAttention op: DIN's attention unit over a user's behaviour sequence, fused
// (compile/attention_fusion.cc makes it; the CPU and CUDA backends run it).
//
//   TargetAttention(keys [U, L, D], key_rows [N] or omitted, query [N, 1, D],
//                   key_proj [U, L, H0], query_proj [N, 1, H0], cross [D, H0], mask [U, L] or omitted,
//                   W1 [H0, H1], b1 [H1] or omitted, ..., Wk [H(k-1), 1], bk [1] or omitted) -> [N, D]
//
// For candidate n, reading the sequence of user u = key_rows[n] (n itself when omitted), each
// position l is scored by the attention MLP
//   h0 = relu(key_proj[u, l] + query_proj[n] + (query[n] * keys[u, l]) cross)
//   hi = relu(h(i-1) Wi + bi)    for every layer but the last
//   s  = h(k-1) Wk + bk          (one value)
// and the output is the mask-weighted sum of the keys: out[n] = sum over l of
// mask[u, l] * s * keys[u, l] (mask 1 when omitted). All FP32. A key_rows entry outside [0, U)
// is bad data (an error on the CPU, the error word on a device). D and every width are at most
// kMaxWidth, and there are at most kMaxLayers (W, b) pairs.
#pragma once

#include <cstdint>

namespace rankd::target_attention {

constexpr int64_t kMaxWidth = 128;
constexpr int kMaxLayers = 4;
constexpr int kFirstLayerInput = 7;  // the first (W, b) pair's W
// Positions per tile of the CUDA kernel; its scratch holds a partial sum per (candidate, tile).
constexpr int64_t kTileRows = 64;

inline int64_t Tiles(int64_t length) { return (length + kTileRows - 1) / kTileRows; }

}  // namespace rankd::target_attention
