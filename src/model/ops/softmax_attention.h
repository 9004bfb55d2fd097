// rankd's SoftmaxAttention op: scaled dot-product attention with a key mask, several heads, in
// the packed layout the projections write (compile/softmax_attention_fusion.cc makes it; the CPU
// and CUDA backends run it). BST's encoder self-attention and its candidate-over-sequence pooling
// are both this op.
//
//   SoftmaxAttention(query [N, M, H*D] or [N, H*D], keys [U, L, H*D], values [U, L, H*E],
//                    mask (BOOL, U*L elements: [U, L] or [U, 1, ..., 1, L]) or omitted,
//                    key_rows INT64 [N] or omitted) -> [N, M, H*E] (or [N, H*E] for a 2-D query)
//   attributes: heads H (default 1), scale (default 1), fill (default -1e9), mask_keeps (default 0)
//
// Row n reads the sequence of u = key_rows[n] (n itself when omitted, then U = N). For each query
// position m and head h, over the positions l of that sequence:
//   s[l] = fill                                    where the mask drops l
//   s[l] = scale * sum over d of query[n, m, h*D + d] * keys[u, l, h*D + d]    elsewhere
//   out[n, m, h*E + e] = sum over l of softmax(s)[l] * values[u, l, h*E + e]
// The mask drops l where mask[u, l] is true (mask_keeps 0: the condition of masked_fill) or
// false (mask_keeps 1). Every position dropped gives the mean of the values, as the written-out
// graph does; L = 0 gives zeros. All FP32. A key_rows entry outside [0, U) is bad data (an error
// on the CPU, the error word on a device).
#pragma once

namespace rankd::softmax_attention {

constexpr int kQuery = 0, kKeys = 1, kValues = 2, kMask = 3, kKeyRows = 4;
constexpr int kInputs = 5;

}  // namespace rankd::softmax_attention
