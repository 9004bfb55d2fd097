// CUDA kernels of Gemm, MatMul and Einsum on cuBLASLt (cpu/matmul.cc is the reference).
#include <map>

#include "backend/cuda/device.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/product_muladd.h"
#include "model/ops/einsum_spec.h"

namespace rankd::cuda {
namespace {

Status Gemm(const KernelArgs& k) {
  const Tensor &a = k.In(0), &b = k.In(1);
  Tensor& out = k.Out(0);
  GemmShape g;
  g.trans_a = k.node.GetInt("transA", 0) != 0;
  g.trans_b = k.node.GetInt("transB", 0) != 0;
  float alpha = k.node.GetFloat("alpha", 1.0f), beta = k.node.GetFloat("beta", 1.0f);
  g.m = out.dim(0);
  g.n = out.dim(1);
  g.k = g.trans_a ? a.dim(0) : a.dim(1);
  bool has_c = k.HasIn(2) && beta != 0.0f;
  const Activation activation = ProductActivation(k.node);  // fused by FuseGemmEpilogues
  g.epilogue = EpilogueOf(false, activation);
  const float* bias = nullptr;
  if (has_c) {
    const Tensor& c = k.In(2);
    // A bias; on an output of one column only where rankd's own product kernel runs it (for
    // cuBLASLt, C is then the bias broadcast).
    bool row_vector = c.size() == g.n && (c.rank() == 1 || (c.rank() == 2 && c.dim(0) == 1)) &&
                      (g.n > 1 || OwnProductKernel(*k.device, g, a.data<float>(), b.data<float>(), out.data<float>()));
    if (row_vector && beta == 1.0f && g.k > 0) {
      g.epilogue = EpilogueOf(true, activation);
      bias = c.data<float>();
    } else {
      RANKD_RETURN_IF_ERROR(BroadcastCopy(k, c, out.shape(), out.raw()));
    }
  }
  if (k.HasIn(3)) {  // FuseProductMulAdds: out = In(3) * product + In(4)
    return ProductMulAdd(*k.device, g, a.data<float>(), b.data<float>(), out.data<float>(), alpha,
                         has_c && !bias ? beta : 0.0f, bias, k.In(3).data<float>(), k.In(4).data<float>())
        .WithContext(k.node.Describe());
  }
  return Sgemm(*k.device, g, a.data<float>(), b.data<float>(), out.data<float>(), alpha, has_c && !bias ? beta : 0.0f,
               bias, k.device->bf16_out);
}

Status MatMul(const KernelArgs& k) {
  const Tensor &a = k.In(0), &b = k.In(1);
  Tensor& out = k.Out(0);
  const MatMulGeometry mm = MatMulShapes(a.shape(), b.shape(), out.shape());
  const int64_t m = mm.m, kk = mm.k, n = mm.n;
  const Shape &batch_a = mm.batch_a, &batch_b = mm.batch_b, &batch_out = mm.batch_out;
  int64_t na = NumElements(batch_a), nb = NumElements(batch_b);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = out.data<float>();
  GemmShape g;
  g.n = n;
  g.k = kk;
  const float* bias = k.HasIn(2) ? k.In(2).data<float>() : nullptr;
  const Activation activation = ProductActivation(k.node);
  if ((bias || activation != Activation::kNone || k.HasIn(3)) && (nb != 1 || kk == 0)) {
    return Internal(k.node.Describe() + ": an epilogue needs a weight matrix");
  }
  if (nb == 1) {  // one B for every batch of A: a single tall product, with its fused epilogue
    g.m = na * m;
    g.epilogue = EpilogueOf(bias != nullptr, activation);
    if (k.HasIn(3)) {  // FuseProductMulAdds: out = In(3) * product + In(4)
      return ProductMulAdd(*k.device, g, pa, pb, pc, 1.0f, 0.0f, bias, k.In(3).data<float>(), k.In(4).data<float>())
          .WithContext(k.node.Describe());
    }
    return Sgemm(*k.device, g, pa, pb, pc, 1.0f, 0.0f, bias, k.device->bf16_out);
  }
  g.m = m;
  int64_t nout = NumElements(batch_out);
  if ((batch_a == batch_out || na == 1) && batch_b == batch_out) {  // strided batch, A maybe shared
    g.batch = nout;
    g.stride_a = na == 1 ? 0 : m * kk;
    g.stride_b = kk * n;
    g.stride_c = m * n;
    return Sgemm(*k.device, g, pa, pb, pc, 1.0f, 0.0f, nullptr, k.device->bf16_out);
  }
  // General broadcast of batch dims: one product per output batch item.
  Shape st_a = BroadcastStrides(batch_a, batch_out), st_b = BroadcastStrides(batch_b, batch_out);
  for (int64_t r = 0; r < nout; ++r) {
    int64_t rem = r, ia = 0, ib = 0;
    for (size_t d = batch_out.size(); d-- > 0;) {
      int64_t c = rem % batch_out[d];
      rem /= batch_out[d];
      ia += c * st_a[d];
      ib += c * st_b[d];
    }
    RANKD_RETURN_IF_ERROR(Sgemm(*k.device, g, pa + ia * m * kk, pb + ib * kk * n, pc + r * m * n, 1.0f, 0.0f));
  }
  // The bf16 copy its readers want (bf16_copies.h), of the whole result.
  return k.device->bf16_out ? ConvertToBf16(k.device->stream, pc, k.device->bf16_out, out.size()) : Status::Ok();
}

Status Einsum(const KernelArgs& k) {
  auto spec = ParseEinsum(k.node.GetString("equation", ""), k.in.size(), k.node);
  RANKD_RETURN_IF_ERROR(spec.status());
  std::vector<Shape> shapes;
  for (const Tensor* t : k.in) shapes.push_back(t->shape());
  RANKD_ASSIGN_OR_RETURN(EinsumPlan p, PlanEinsum(*spec, shapes, k.node));
  Tensor& out = k.Out(0);
  if (p.single) return TransposeDevice(k, k.In(0).raw(), k.In(0).shape(), p.perm_a, 4, out.raw());
  auto align = [](int64_t floats) { return (floats * 4 + 63) / 64 * 16; };  // in floats
  float* ta = static_cast<float*>(k.scratch);
  float* tb = ta + align(NumElements(p.a_permuted));
  float* tc = tb + align(NumElements(p.b_permuted));
  RANKD_RETURN_IF_ERROR(TransposeDevice(k, k.In(0).raw(), k.In(0).shape(), p.perm_a, 4, ta));
  RANKD_RETURN_IF_ERROR(TransposeDevice(k, k.In(1).raw(), k.In(1).shape(), p.perm_b, 4, tb));
  GemmShape g;
  g.m = p.rows;
  g.n = p.cols;
  g.k = p.inner;
  g.batch = p.batch;
  g.stride_a = p.rows * p.inner;
  g.stride_b = p.inner * p.cols;
  g.stride_c = p.rows * p.cols;
  RANKD_RETURN_IF_ERROR(Sgemm(*k.device, g, ta, tb, tc, 1.0f, 0.0f));
  return TransposeDevice(k, tc, p.c_shape, p.perm_out, 4, out.raw());
}

}  // namespace

void AppendMatMulKernels(KernelTable& out) {
  out["Gemm"] = Gemm;
  out["MatMul"] = MatMul;
  out["Einsum"] = Einsum;
}

}  // namespace rankd::cuda
