// CPU kernels of Gemm, MatMul and Einsum, through a multi-threaded sgemm: oneDNN's (default) or
// OpenBLAS's (-DRANKD_CPU_GEMM=openblas); products by a model's large weight matrices through
// oneDNN's matmul on weights packed once (packed_matmuls.h).
#if RANKD_GEMM_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#else
#include <cblas.h>
#endif

#include <algorithm>
#include <cstring>
#include <optional>

#include "backend/activation.h"
#include "backend/broadcast.h"
#include "backend/cpu/host_resources.h"
#include "backend/cpu/kernels.h"
#include "backend/geometry.h"
#include "common/parallel.h"
#include "model/ops/einsum_spec.h"

namespace rankd::cpu {

void Sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
           float alpha, float beta) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0.0f)
      std::memset(c, 0, static_cast<size_t>(m * n) * sizeof(float));
    else
      for (int64_t i = 0; i < m * n; ++i) c[i] *= beta;
    return;
  }
  // A small product runs on this thread alone: sgemm would open a team of fewer threads than the
  // pool has, and libgomp ends the pool's surplus threads at such a region, so the next full one
  // (the next product) creates them again: 0.5-0.7 ms a W1 request at 2-8 pairs, whose small
  // layers (256 x 128, 13 x 512, 256 x 1) went to sgemm (docs/engine.md). One core does such a
  // product in microseconds.
  std::optional<ScopedOmpThreads> one_thread;
  // (Inside a parallel region sgemm runs on one thread anyway.)
  if (m * n * k < kOneThreadSgemmMacs && !omp_in_parallel()) one_thread.emplace(1);
#if RANKD_GEMM_ONEDNN
  dnnl_status_t s = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, trans_a ? m : k, b,
                               trans_b ? k : n, beta, c, n);
  RANKD_CHECK_MSG(s == dnnl_success, "dnnl_sgemm failed");
#else
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(trans_a ? m : k), b, static_cast<blasint>(trans_b ? k : n), beta, c,
              static_cast<blasint>(n));
#endif
}

namespace {

// A product's fused epilogue, applied to its `rows` rows of n columns after the product: the
// activation after the bias, then the multiply-add (FuseProductMulAdds: m * act(x + bias) + c).
struct ProductEpilogue {
  const float* bias = nullptr;  // one per column, or null
  Activation activation = Activation::kNone;
  const float* multiplier = nullptr;  // input 3 and input 4, of the output's shape, or null
  const float* addend = nullptr;

  ProductEpilogue(const KernelArgs& k, const float* row_bias) : bias(row_bias), activation(ProductActivation(k.node)) {
    if (k.HasIn(3)) {
      multiplier = k.In(3).data<float>();
      addend = k.In(4).data<float>();
    }
  }
  bool empty() const { return !bias && activation == Activation::kNone && !multiplier; }
  void Apply(float* out, int64_t rows, int64_t n) const {
    switch (activation) {  // the activation a constant of each loop, which then vectorises
      case Activation::kNone:
        return ApplyAs<Activation::kNone>(out, rows, n);
      case Activation::kRelu:
        return ApplyAs<Activation::kRelu>(out, rows, n);
      case Activation::kGeluTanh:
        return ApplyAs<Activation::kGeluTanh>(out, rows, n);
      case Activation::kSigmoid:
        return ApplyAs<Activation::kSigmoid>(out, rows, n);
    }
  }

 private:
  template <Activation A>
  void ApplyAs(float* out, int64_t rows, int64_t n) const {
    ParallelFor(rows, std::max<int64_t>(n, 1), [&](int64_t begin, int64_t end) {  // rows of n elements
      for (int64_t r = begin; r < end; ++r) {
        float* row = out + r * n;
        if (bias) {
          for (int64_t j = 0; j < n; ++j) row[j] = Activate(A, row[j] + bias[j]);
        } else if (A != Activation::kNone) {
          for (int64_t j = 0; j < n; ++j) row[j] = Activate(A, row[j]);
        }
        if (!multiplier) continue;
        const float* m = multiplier + r * n;
        const float* c = addend + r * n;
        for (int64_t j = 0; j < n; ++j) row[j] = m[j] * row[j] + c[j];
      }
    });
  }
};

// Sgemm's product for a kernel of a model: on the model's packed weights where B is one of them
// (packed_matmuls.h), else in sgemm.
Status Product(const KernelArgs& k, const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t kk,
               bool trans_a, bool trans_b, float alpha, float beta) {
  const PackedMatmuls* packed = HostModelResources::PackedOf(k);
  if (packed && !trans_a && alpha == 1.0f && m > 0 && kk > 0 && packed->Takes(b, trans_b)) {
    return packed->Run(a, b, trans_b, c, m, n, kk, beta);
  }
  Sgemm(a, b, c, m, n, kk, trans_a, trans_b, alpha, beta);
  return Status::Ok();
}

Status Gemm(const KernelArgs& k) {
  const Tensor &a = k.In(0), &b = k.In(1);
  Tensor& out = k.Out(0);
  bool ta = k.node.GetInt("transA", 0) != 0, tb = k.node.GetInt("transB", 0) != 0;
  float alpha = k.node.GetFloat("alpha", 1.0f), beta = k.node.GetFloat("beta", 1.0f);
  int64_t m = out.dim(0), n = out.dim(1), kk = ta ? a.dim(0) : a.dim(1);
  float* c = out.data<float>();
  bool has_c = k.HasIn(2) && beta != 0.0f;
  if (has_c) {  // broadcast C into the output, then accumulate the product onto it
    const Tensor& bias = k.In(2);
    auto layout = MakeBroadcastLayout<1>(out.shape(), {&bias.shape()});
    const float* pb = bias.data<float>();
    ForEachRow<1>(layout,
                  [&](int64_t o, const std::array<int64_t, 1>& off, int64_t len, const std::array<int64_t, 1>& st) {
                    for (int64_t i = 0; i < len; ++i) c[o + i] = pb[off[0] + i * st[0]];
                  });
  }
  RANKD_RETURN_IF_ERROR(Product(k, a.data<float>(), b.data<float>(), c, m, n, kk, ta, tb, alpha, has_c ? beta : 0.0f));
  const ProductEpilogue epilogue(k, nullptr);  // fused by FuseGemmEpilogues and FuseProductMulAdds
  if (!epilogue.empty()) epilogue.Apply(c, m, n);
  return Status::Ok();
}

Status MatMul(const KernelArgs& k) {
  const Tensor &a = k.In(0), &b = k.In(1);
  Tensor& out = k.Out(0);
  const MatMulGeometry g = MatMulShapes(a.shape(), b.shape(), out.shape());
  const int64_t m = g.m, kk = g.k, n = g.n;
  int64_t na = NumElements(g.batch_a), nb = NumElements(g.batch_b);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = out.data<float>();
  const ProductEpilogue epilogue(k, k.HasIn(2) ? k.In(2).data<float>() : nullptr);
  if (!epilogue.empty() && (nb != 1 || kk == 0))
    return Internal(k.node.Describe() + ": an epilogue needs a weight matrix");
  if (nb == 1) {  // one B for every batch of A: a single tall product, with its fused epilogue
    RANKD_RETURN_IF_ERROR(Product(k, pa, pb, pc, na * m, n, kk, false, false, 1.0f, 0.0f));
    if (!epilogue.empty()) epilogue.Apply(pc, na * m, n);
    return Status::Ok();
  }
  // Broadcast batch dims: walk the output batch, finding each operand's matrix.
  auto layout = MakeBroadcastLayout<2>(g.batch_out, {&g.batch_a, &g.batch_b});
  // Sequential over batches: sgemm itself is multi-threaded.
  int64_t row = layout.dims.back(), rows = NumRows(layout);
  for (int64_t r = 0; r < rows; ++r) {
    auto [ia, ib] = RowOffsets(layout, r);
    for (int64_t j = 0; j < row; ++j) {
      int64_t ja = ia + j * layout.strides[0].back(), jb = ib + j * layout.strides[1].back();
      Sgemm(pa + ja * m * kk, pb + jb * kk * n, pc + (r * row + j) * m * n, m, n, kk, false, false, 1.0f, 0.0f);
    }
  }
  return Status::Ok();
}

Status Einsum(const KernelArgs& k) {
  auto spec = ParseEinsum(k.node.GetString("equation", ""), k.in.size(), k.node);
  RANKD_RETURN_IF_ERROR(spec.status());
  std::vector<Shape> shapes;
  for (const Tensor* t : k.in) shapes.push_back(t->shape());
  RANKD_ASSIGN_OR_RETURN(EinsumPlan p, PlanEinsum(*spec, shapes, k.node));
  Tensor& out = k.Out(0);
  if (p.single) {
    TransposeBytes(k.In(0).raw(), k.In(0).shape(), p.perm_a, 4, out.raw());
    return Status::Ok();
  }
  auto align = [](int64_t floats) { return (floats * 4 + 63) / 64 * 16; };  // in floats
  float* ta = static_cast<float*>(k.scratch);
  float* tb = ta + align(NumElements(p.a_permuted));
  float* tc = tb + align(NumElements(p.b_permuted));
  TransposeBytes(k.In(0).raw(), k.In(0).shape(), p.perm_a, 4, ta);
  TransposeBytes(k.In(1).raw(), k.In(1).shape(), p.perm_b, 4, tb);
  for (int64_t i = 0; i < p.batch; ++i) {
    Sgemm(ta + i * p.rows * p.inner, tb + i * p.inner * p.cols, tc + i * p.rows * p.cols, p.rows, p.cols, p.inner,
          false, false, 1.0f, 0.0f);
  }
  TransposeBytes(tc, p.c_shape, p.perm_out, 4, out.raw());
  return Status::Ok();
}

}  // namespace

void AppendMatMulKernels(KernelTable& out) {
  out["Gemm"] = Gemm;
  out["MatMul"] = MatMul;
  out["Einsum"] = Einsum;
}

}  // namespace rankd::cpu
