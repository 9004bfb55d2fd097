// PackedMatmuls: a model's products by its large constant weight matrices, run as oneDNN's matmul
// with the weights packed once into the blocked layout its kernel reads. sgemm packs B again on
// every call, which at W1's 1-64 rows costs about as much as the product itself (on the H200
// machine's Xeon a packed fp32 product of 64 x 3456 by 3456 x 512 took 0.28 ms, sgemm 0.53).
//
// In fp32 the sums are fp32 as sgemm's (in another order: results differ from sgemm's by rounding).
// At bf16 and bf16-activations precision (backend.h), where the CPU multiplies bf16 natively
// (AVX512-BF16 or AMX, as oneDNN finds it), the weights are packed in bf16 and each call rounds A's
// rows to bf16, accumulating and writing fp32 as a GPU's bf16 tensor cores and PyTorch's CPU
// autocast do; every activation between kernels stays fp32.
//
// Only weights of at least kMinWeights values with both sides at least kMinSide are packed: a call
// costs oneDNN two parallel regions (and at bf16 a pass rounding A's m x k values), which a small
// product does not win back (DIN's products, its 352 x 200 top layer the largest, ran slower in
// bf16). Other products (B computed at run time or small, a transposed A, alpha other than 1, a
// batch of B matrices) run in sgemm.
//
// A fixed-shape matmul is several times faster than one with the rows left open, but takes about a
// millisecond to create: one is made per (weights, rows) on first use and kept (a model's request
// sizes are few; past kMaxPrimitives they are all dropped and made again as used). The weights are
// packed when their first primitive is made (once per layout, as a rule one).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "common/mutex.h"

namespace rankd::cpu {

// Whether this CPU multiplies bf16 natively (oneDNN's AVX512-BF16 or AMX kernels): without it
// bf16 precision computes in fp32 on the CPU.
bool HostHasBf16Matmuls();

class PackedMatmuls {
 public:
  // The products of `graph` whose B is a 2-D fp32 constant of at least kMinWeights values, in bf16
  // when `bf16` and the CPU multiplies bf16, else in fp32; none when oneDNN is not the sgemm
  // provider.
  static std::unique_ptr<PackedMatmuls> Create(const Graph& graph, bool bf16);
  ~PackedMatmuls();

  // Whether a product by `b` (its B, transposed or not) runs here.
  bool Takes(const float* b, bool trans_b) const { return weights_.count({b, trans_b}) > 0; }
  // c[m,n] = a[m,k] · op(b) + beta · c (beta 0 or the Gemm's, over a C already in `c`), where
  // Takes(b, trans_b).
  Status Run(const float* a, const float* b, bool trans_b, float* c, int64_t m, int64_t n, int64_t k, float beta) const;

  int64_t weights() const { return static_cast<int64_t>(weights_.size()); }
  bool bf16() const { return bf16_; }
  // Weights packed: at least kMinWeights values, both sides at least kMinSide.
  static constexpr int64_t kMinWeights = 131072, kMinSide = 64;

 private:
  struct Packed;
  struct Primitive;
  using WeightKey = std::pair<const float*, bool>;
  using PrimitiveKey = std::tuple<const float*, bool, int64_t, int64_t, int64_t, uint32_t>;  // b, trans, m, n, k, beta

  explicit PackedMatmuls(bool bf16) : bf16_(bf16) {}
  StatusOr<std::shared_ptr<const Primitive>> PrimitiveFor(const PrimitiveKey& key) const;

  static constexpr size_t kMaxPrimitives = 512;
  const bool bf16_;
  std::set<WeightKey> weights_;  // set at Create, then only read
  mutable Mutex mu_;
  // Each weight matrix packed, in the layouts its primitives read (one, as a rule).
  mutable std::map<WeightKey, std::vector<std::shared_ptr<const Packed>>> packed_ RANKD_GUARDED_BY(mu_);
  mutable std::map<PrimitiveKey, std::shared_ptr<const Primitive>> primitives_ RANKD_GUARDED_BY(mu_);
};

}  // namespace rankd::cpu
