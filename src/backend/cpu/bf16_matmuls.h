// Bf16Matmuls: a model's matrix products with bf16 operands on the CPU, for bf16 and
// bf16-activations precision (backend.h), where the CPU multiplies bf16 natively (AVX512-BF16 or
// AMX, as oneDNN finds it). Each product rounds its A rows to bf16, accumulates in fp32 and writes
// fp32, as a GPU's bf16 tensor cores and PyTorch's CPU autocast do; B, a constant weight matrix of
// the graph, is rounded to bf16 once, into the blocked layout oneDNN's kernel reads (its copy into
// those blocks on every call cost W1's small requests 2-4x their fp32 time). Products that do not
// qualify (B computed at run time or small, a transposed A, alpha other than 1, a batch of B
// matrices) stay in fp32.
//
// oneDNN's matmul for a fixed shape is several times faster than one with the rows left open, but
// takes about a millisecond to create: one is made per (weights, rows) on first use and kept (a
// model's request sizes are few; past kMaxPrimitives they are all dropped and made again as used).
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

class Bf16Matmuls {
 public:
  // The products of `graph` whose B is a 2-D fp32 constant of at least kMinWeights values; none
  // when the CPU lacks bf16 products or oneDNN is not the sgemm provider.
  static std::unique_ptr<Bf16Matmuls> Create(const Graph& graph);
  ~Bf16Matmuls();

  // Whether a product by `b` (its B, transposed or not) runs here.
  bool Takes(const float* b, bool trans_b) const { return weights_.count({b, trans_b}) > 0; }
  // c[m,n] = a[m,k] · op(b) + beta · c (beta 0 or the Gemm's, over a C already in `c`), with a's
  // rows and b rounded to bf16, where Takes(b, trans_b).
  Status Run(const float* a, const float* b, bool trans_b, float* c, int64_t m, int64_t n, int64_t k, float beta) const;

  int64_t weights() const { return static_cast<int64_t>(weights_.size()); }

 private:
  struct Blocked;
  struct Primitive;
  using WeightKey = std::pair<const float*, bool>;
  using PrimitiveKey = std::tuple<const float*, bool, int64_t, int64_t, int64_t, uint32_t>;  // b, trans, m, n, k, beta

  Bf16Matmuls() = default;
  StatusOr<std::shared_ptr<const Primitive>> PrimitiveFor(const PrimitiveKey& key) const;

  // Weights of fewer values, or with a side under kMinSide, stay in fp32: a call costs oneDNN two
  // parallel regions and A's rounding, which a small product does not win back (DIN's products
  // over candidates x history, 64 wide, and its 352 x 200 top layer ran slower in bf16), while
  // large weights gain even at one row (half the bytes read).
  static constexpr int64_t kMinWeights = 131072, kMinSide = 64;
  static constexpr size_t kMaxPrimitives = 512;
  std::set<WeightKey> weights_;  // set at Create, then only read
  mutable Mutex mu_;
  // Each weight matrix in bf16, in the layouts its primitives read (one, as a rule).
  mutable std::map<WeightKey, std::vector<std::shared_ptr<const Blocked>>> blocked_ RANKD_GUARDED_BY(mu_);
  mutable std::map<PrimitiveKey, std::shared_ptr<const Primitive>> primitives_ RANKD_GUARDED_BY(mu_);
};

}  // namespace rankd::cpu
