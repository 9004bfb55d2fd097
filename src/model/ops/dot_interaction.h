// rankd's DotInteraction op: DLRM's feature interaction, the dot products of pairs of a row's
// feature vectors, fused (compile/dot_interaction_fusion.cc makes it; the CPU and CUDA backends
// run it).
//
//   DotInteraction(features [N, F, D], pairs INT64 [P, 2] (a constant), dense [N, W] or omitted)
//     -> [N, W + P]
//
//   out[n, w]     = dense[n, w]                                          for w < W
//   out[n, W + p] = sum over d of features[n, i, d] * features[n, j, d]  with (i, j) = pairs[p]
//
// Every pair lies in [0, F) x [0, F), checked when the plan is built, so kernels may trust it.
// PyTorch writes it as bmm(T, Tᵀ), the flattened products gathered at constant positions (the
// strict lower triangle in DLRM, the upper one in TorchRec), and the bottom MLP's output
// concatenated in front. All FP32, whatever the model's precision: the CPU sums a pair over d in
// order, CUDA in four partial sums added in order (docs/passes.md).
#pragma once

namespace rankd::dot_interaction {

constexpr int kFeatures = 0, kPairs = 1, kDense = 2;
constexpr int kInputs = 3;

}  // namespace rankd::dot_interaction
