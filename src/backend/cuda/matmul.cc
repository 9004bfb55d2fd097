// CUDA kernels of Gemm, MatMul and Einsum on cuBLASLt (cpu/matmul.cc is the reference).
#include <map>

#include "backend/cuda/device.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mlp_chain.h"
#include "backend/cuda/product_muladd.h"
#include "compile/ops/einsum_spec.h"

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
      RETURN_IF_ERROR(BroadcastCopy(k, c, out.shape(), out.raw()));
    }
  }
  if (k.HasIn(3)) {  // FuseProductMulAdds: out = In(3) * product + In(4)
    return ProductMulAdd(*k.device, g, a.data<float>(), b.data<float>(), out.data<float>(), alpha,
                         has_c && !bias ? beta : 0.0f, bias, k.In(3).data<float>(), k.In(4).data<float>())
        .WithContext(k.node.Describe());
  }
  return Sgemm(*k.device, g, a.data<float>(), b.data<float>(), out.data<float>(), alpha,
               has_c && !bias ? beta : 0.0f, bias, k.device->bf16_out);
}

// MlpChain (FuseMlpChains): in one kernel where it takes the chain (mlp_chain.h), else layer by
// layer as the Gemms it replaced would run, each hidden result in the scratch the schema reserves
// (fp32, then its bf16 copy, which the next layer reads as a product reads its producer's).
Status MlpChain(const KernelArgs& k) {
  DeviceContext& ctx = *k.device;
  const int layers = (k.node.NumInputs() - 1) / 2;
  const std::vector<int64_t> activations = k.node.GetInts("activations");
  const Tensor& x = k.In(0);
  Tensor& out = k.Out(0);
  const int64_t m = x.dim(0);
  if (m == 0) return Status::Ok();
  auto weight = [&](int l) -> const Tensor& { return k.In(1 + 2 * l); };
  auto bias = [&](int l) { return k.In(2 + 2 * l).data<float>(); };
  auto activation = [&](int l) { return static_cast<Activation>(activations[static_cast<size_t>(l)]); };
  auto tiled = [&](const Tensor& w) -> const void* {  // the chain kernel's layout of a hidden weight
    if (!ctx.bf16_weights_tiled) return nullptr;
    auto it = ctx.bf16_weights_tiled->find(w.raw());
    return it == ctx.bf16_weights_tiled->end() ? nullptr : it->second;
  };
  if (Bf16Products(ctx.precision) && layers <= kMlpChainKernelLayers) {
    MlpChainRun r;
    r.x_bf16 = ctx.bf16_a && ctx.bf16_a_source == x.raw();
    r.x = r.x_bf16 ? ctx.bf16_a : x.raw();
    r.m = m;
    r.layers = layers;
    for (int l = 0; l < layers; ++l) {
      r.layer[l] = {Bf16WeightRows(ctx, weight(l).data<float>(), true), tiled(weight(l)), bias(l), static_cast<int>(weight(l).dim(0)),
                    static_cast<int>(weight(l).dim(1)), activation(l)};
    }
    r.out = ctx.bf16_out && ctx.bf16_out_alone ? nullptr : out.data<float>();
    r.out_bf16 = ctx.bf16_out;
    if (MlpChainFits(r)) return MlpChainKernel(ctx.stream, r).WithContext(k.node.Describe());
  }
  const void* saved_a = ctx.bf16_a;
  const void* saved_source = ctx.bf16_a_source;
  auto* room = static_cast<uint8_t*>(k.scratch);
  const float* in = x.data<float>();
  Status status = Status::Ok();
  for (int l = 0; l < layers && status.ok(); ++l) {
    GemmShape g;
    g.trans_b = true;
    g.m = m;
    g.n = weight(l).dim(0);
    g.k = weight(l).dim(1);
    g.epilogue = EpilogueOf(true, activation(l));
    if (l + 1 == layers) {
      status = Sgemm(ctx, g, in, weight(l).data<float>(), out.data<float>(), 1.0f, 0.0f, bias(l), ctx.bf16_out);
      break;
    }
    auto* y = reinterpret_cast<float*>(room);
    uint8_t* y_bf16 = room + m * g.n * 4;
    room += (m * g.n * 6 + 255) / 256 * 256;
    status = Sgemm(ctx, g, in, weight(l).data<float>(), y, 1.0f, 0.0f, bias(l), y_bf16);
    ctx.bf16_a_source = y;  // the next layer reads the copy (Sgemm writes none without bf16 products)
    ctx.bf16_a = Bf16Products(ctx.precision) ? y_bf16 : nullptr;
    in = y;
  }
  ctx.bf16_a = saved_a;
  ctx.bf16_a_source = saved_source;
  return status.WithContext(k.node.Describe());
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
    RETURN_IF_ERROR(Sgemm(*k.device, g, pa + ia * m * kk, pb + ib * kk * n, pc + r * m * n, 1.0f, 0.0f));
  }
  // The bf16 copy its readers want (bf16_copies.h), of the whole result.
  return k.device->bf16_out ? ConvertToBf16(k.device->stream, pc, k.device->bf16_out, out.size()) : Status::Ok();
}

Status Einsum(const KernelArgs& k) {
  auto spec = ParseEinsum(k.node.GetString("equation", ""), k.in.size(), k.node);
  RETURN_IF_ERROR(spec.status());
  std::vector<Shape> shapes;
  for (const Tensor* t : k.in) shapes.push_back(t->shape());
  ASSIGN_OR_RETURN(EinsumPlan p, PlanEinsum(*spec, shapes, k.node));
  Tensor& out = k.Out(0);
  if (p.single) return TransposeDevice(k, k.In(0).raw(), k.In(0).shape(), p.perm_a, 4, out.raw());
  auto align = [](int64_t floats) { return (floats * 4 + 63) / 64 * 16; };  // in floats
  float* ta = static_cast<float*>(k.scratch);
  float* tb = ta + align(NumElements(p.a_permuted));
  float* tc = tb + align(NumElements(p.b_permuted));
  RETURN_IF_ERROR(TransposeDevice(k, k.In(0).raw(), k.In(0).shape(), p.perm_a, 4, ta));
  RETURN_IF_ERROR(TransposeDevice(k, k.In(1).raw(), k.In(1).shape(), p.perm_b, 4, tb));
  GemmShape g;
  g.m = p.rows;
  g.n = p.cols;
  g.k = p.inner;
  g.batch = p.batch;
  g.stride_a = p.rows * p.inner;
  g.stride_b = p.inner * p.cols;
  g.stride_c = p.rows * p.cols;
  RETURN_IF_ERROR(Sgemm(*k.device, g, ta, tb, tc, 1.0f, 0.0f));
  return TransposeDevice(k, tc, p.c_shape, p.perm_out, 4, out.raw());
}

}  // namespace

void AppendMatMulKernels(KernelTable& out) {
  out["Gemm"] = Gemm;
  out["MlpChain"] = MlpChain;
  out["MatMul"] = MatMul;
  out["Einsum"] = Einsum;
}

}  // namespace rankd::cuda
