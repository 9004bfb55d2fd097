#include "backend/cuda/gemm.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/device_span.h"
#include "backend/cuda/settings.h"
#include "backend/cuda/short_k_gemm.h"
#include "backend/cuda/small_rows_gemm.h"
#include "backend/cuda/split_k_gemm.h"
#include "common/mutex.h"

namespace rankd::cuda {
namespace {

Status LtCheck(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(std::string(what) + " failed: cublas status " + std::to_string(static_cast<int>(s)));
}
#define RANKD_LT_RETURN(expr) RANKD_RETURN_IF_ERROR(LtCheck((expr), #expr))

int Alignment(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  for (int a : {16, 8}) {
    if (v % static_cast<uintptr_t>(a) == 0) return a;
  }
  return 4;
}

// cuBLASLt is column-major: a row-major X is its transpose there. So the row-major product
// C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: B goes first.
// With bf16 the operands are bf16 (converted by Sgemm) and the product accumulates in fp32 and is
// written in fp32 or, with a bf16 output, bf16 (the bias in bf16 or fp32, as `out` says);
// otherwise everything is fp32, tf32 letting the tensor cores round the operands.
Status Build(DeviceContext& ctx, const GemmShape& g, int alignment, GemmOutput out, GemmCache::Entry& e) {
  const bool bf16_d = out != GemmOutput::kF32;
  cublasComputeType_t compute = ctx.precision == Precision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cudaDataType_t operand = Bf16Products(ctx.precision) ? CUDA_R_16BF : CUDA_R_32F;
  RANKD_LT_RETURN(cublasLtMatmulDescCreate(&e.op, compute, CUDA_R_32F));
  cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  RANKD_LT_RETURN(cublasLtMatmulDescSetAttribute(e.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  RANKD_LT_RETURN(cublasLtMatmulDescSetAttribute(e.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (g.epilogue == Epilogue::kBias || g.epilogue == Epilogue::kBiasSigmoid)
    epi = CUBLASLT_EPILOGUE_BIAS;  // sigmoid: after
  if (g.epilogue == Epilogue::kBiasRelu) epi = CUBLASLT_EPILOGUE_RELU_BIAS;
  if (g.epilogue == Epilogue::kRelu) epi = CUBLASLT_EPILOGUE_RELU;
  if (g.epilogue == Epilogue::kBiasGelu) epi = CUBLASLT_EPILOGUE_GELU_BIAS;
  if (g.epilogue == Epilogue::kGelu) epi = CUBLASLT_EPILOGUE_GELU;
  RANKD_LT_RETURN(cublasLtMatmulDescSetAttribute(e.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (out == GemmOutput::kBf16F32Bias && HasBias(g.epilogue)) {
    int32_t bias_type = CUDA_R_32F;  // by default the bias has the output's type
    RANKD_LT_RETURN(
        cublasLtMatmulDescSetAttribute(e.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  // Stored (pre-op) column-major shapes.
  uint64_t b_rows = static_cast<uint64_t>(g.trans_b ? g.k : g.n), b_cols = static_cast<uint64_t>(g.trans_b ? g.n : g.k);
  uint64_t a_rows = static_cast<uint64_t>(g.trans_a ? g.m : g.k), a_cols = static_cast<uint64_t>(g.trans_a ? g.k : g.m);
  RANKD_LT_RETURN(cublasLtMatrixLayoutCreate(&e.b, operand, b_rows, b_cols, static_cast<int64_t>(b_rows)));
  RANKD_LT_RETURN(cublasLtMatrixLayoutCreate(&e.a, operand, a_rows, a_cols, static_cast<int64_t>(a_rows)));
  RANKD_LT_RETURN(cublasLtMatrixLayoutCreate(&e.c, bf16_d ? CUDA_R_16BF : CUDA_R_32F, static_cast<uint64_t>(g.n),
                                             static_cast<uint64_t>(g.m), g.n));
  if (g.batch > 1) {
    int32_t count = static_cast<int32_t>(g.batch);
    auto set = [&](cublasLtMatrixLayout_t l, int64_t stride) -> Status {
      RANKD_LT_RETURN(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      RANKD_LT_RETURN(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
      return Status::Ok();
    };
    RANKD_RETURN_IF_ERROR(set(e.b, g.stride_b));
    RANKD_RETURN_IF_ERROR(set(e.a, g.stride_a));
    RANKD_RETURN_IF_ERROR(set(e.c, g.stride_c));
  }
  cublasLtMatmulPreference_t pref;
  RANKD_LT_RETURN(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = ctx.lt_workspace_bytes;
  uint32_t align = static_cast<uint32_t>(alignment);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align));
  }
  cublasLtMatmulHeuristicResult_t results[kGemmCandidates] = {};
  int found = 0;
  cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(ctx.lt, e.op, e.b, e.a, e.c, e.c, pref, kGemmCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  RANKD_LT_RETURN(s);
  if (found == 0)
    return Internal("cuBLASLt has no algorithm for a " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" +
                    std::to_string(g.k) + " product");
  e.algo = results[0].algo;
  for (int i = 1; i < found; ++i) e.untried.push_back(results[i].algo);
  return Status::Ok();
}

std::atomic<bool> tuning_on{true};

// Off (EnableGemmTuning(false), `--cuda gemm_tuning=off`): the heuristic's first algorithm for every product.
bool TuningEnabled() { return tuning_on.load(std::memory_order_relaxed); }

// The algorithms timed so far, per device and product, which every executor of the process takes:
// the first executor to meet a product times its candidates while the others wait for its choice.
// Timed by each executor for itself, a loaded model's executors timed theirs side by side, each
// disturbed by the others, and chose differently (W1 at 32,768 pairs, four executors on the H200:
// three choices for the top MLP's first product; the first executor timed the fastest at 296 µs a
// run, the others at 588 to 836).
struct TimedChoices {
  Mutex mu;  // held while a product's candidates are timed
  std::map<std::pair<int, GemmCache::Key>, cublasLtMatmulAlgo_t> algos;
  GemmTunings counts;
};
TimedChoices& Timed() {
  static TimedChoices* timed = new TimedChoices;  // never destroyed: executors may outlive statics
  return *timed;
}

// Times the heuristic's first algorithm and its runners-up on the product's own operands and
// keeps the fastest, unless an executor of the process already has (TimedChoices). Only outside a
// capture and when D does not accumulate into C (beta = 0), so the repeated runs leave the result
// as one run would. The candidates are timed in rounds, each round timing every candidate once
// (kRuns products in a row), and a candidate counts its fastest round: timed one after another in
// a single pass, the first candidates of a load ran while the clocks still rose from idle, and a
// few microseconds of noise chose between algorithms that differ by less. RANKD_GEMM_LOG=1
// prints each timed product's times and choice.
Status ChooseFastest(DeviceContext& ctx, const GemmCache::Key& key, GemmCache::Entry& e, const void* alpha,
                     const void* beta, const void* op_a, const void* op_b, void* d) {
  std::vector<cublasLtMatmulAlgo_t> candidates = {e.algo};
  candidates.insert(candidates.end(), e.untried.begin(), e.untried.end());
  e.untried.clear();
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  RANKD_RETURN_IF_ERROR(Check(cudaStreamIsCapturing(ctx.stream, &capturing), "cudaStreamIsCapturing"));
  if (candidates.size() < 2 || capturing != cudaStreamCaptureStatusNone || !TuningEnabled()) return Status::Ok();
  int device = 0;
  RANKD_RETURN_IF_ERROR(Check(cudaGetDevice(&device), "cudaGetDevice"));
  TimedChoices& timed = Timed();
  MutexLock lock(timed.mu);
  if (auto it = timed.algos.find({device, key}); it != timed.algos.end()) {
    e.algo = it->second;
    ++timed.counts.reused;
    return Status::Ok();
  }
  auto run = [&](size_t i) {
    return cublasLtMatmul(ctx.lt, e.op, alpha, op_b, e.b, op_a, e.a, beta, d, e.c, d, e.c, &candidates[i],
                          ctx.lt_workspace, ctx.lt_workspace_bytes, ctx.stream);
  };
  std::vector<size_t> runnable;  // a runner-up may decline these operands
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (run(i) == CUBLAS_STATUS_SUCCESS) runnable.push_back(i);
  }
  if (runnable.size() < 2) {
    if (!runnable.empty()) e.algo = candidates[runnable[0]];
    return Status::Ok();
  }
  constexpr int kRounds = 3, kRuns = 4;
  std::vector<double> fastest(candidates.size(), 0);
  DeviceSpan span;
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i : runnable) {
      RANKD_RETURN_IF_ERROR(span.Begin(ctx.stream));
      for (int r = 0; r < kRuns; ++r) RANKD_LT_RETURN(run(i));
      RANKD_RETURN_IF_ERROR(span.End(ctx.stream));
      RANKD_ASSIGN_OR_RETURN(double ms, span.Elapsed());
      if (round == 0 || ms < fastest[i]) fastest[i] = ms;
    }
  }
  size_t best = runnable[0];
  for (size_t i : runnable) {
    if (fastest[i] < fastest[best]) best = i;
  }
  e.algo = candidates[best];
  timed.algos[{device, key}] = e.algo;
  ++timed.counts.timed;
  if (GemmLog()) {
    std::string line = "rankd: product m=" + std::to_string(std::get<2>(key)) +
                       " n=" + std::to_string(std::get<3>(key)) + " k=" + std::to_string(std::get<4>(key)) +
                       ": candidate " + std::to_string(best) + " chosen; µs a run:";
    for (size_t i : runnable) line += " " + std::to_string(static_cast<int>(fastest[i] * 1000 / kRuns));
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  return Status::Ok();
}

// The bf16 copy of a constant in `copies` (bf16 precision), or null.
const void* Bf16Copy(const std::unordered_map<const void*, const void*>* copies, const float* constant) {
  if (!copies) return nullptr;
  auto it = copies->find(constant);
  return it == copies->end() ? nullptr : it->second;
}
const void* Bf16Weight(const DeviceContext& ctx, const float* constant) { return Bf16Copy(ctx.bf16_weights, constant); }

// Whether the short-k kernel takes a product (bf16 precision: cuBLASLt would convert A and
// often reduce split-K parts for a k tensor cores gain nothing on; short_k_gemm.h).
bool TakesShortK(const DeviceContext& ctx, const GemmShape& g) {
  return Bf16Products(ctx.precision) && g.batch == 1 && !g.trans_a && g.k > 0 && g.k < kShortK && g.m <= kShortKMaxRows;
}

// A bf16 product with a weight matrix B as the few-rows kernel runs it (B read as [N, K], its
// transposed copy when it is [K, N]): of at most kSmallRows rows as it is, else of at most
// kSmallRows columns transposed (B's rows the few rows, A's rows streamed); nullopt when the
// kernel does not take it.
std::optional<SmallRowsProduct> FewRowsProduct(const DeviceContext& ctx, const GemmShape& g, const float* a,
                                               const float* b, float* c, float alpha, float beta, const float* bias,
                                               void* bf16_d) {
  if (!Bf16Products(ctx.precision) || g.batch != 1 || g.trans_a) return std::nullopt;
  if (g.m > kSmallRows && g.n > kSmallRows) return std::nullopt;
  const void* weight = Bf16WeightRows(ctx, b, g.trans_b);
  if (!weight) return std::nullopt;
  const bool bf16_a = ctx.bf16_a && ctx.bf16_a_source == a;  // its producer wrote only that, maybe
  const void* rows = bf16_a ? ctx.bf16_a : static_cast<const void*>(a);
  SmallRowsProduct p;
  if (g.m <= kSmallRows) {
    p.a = rows, p.a_bf16 = bf16_a;
    p.w = weight;
    p.m = g.m, p.n = g.n;
  } else {
    p.a = weight, p.a_bf16 = true;
    p.w = rows, p.w_f32 = !bf16_a;
    p.m = g.n, p.n = g.m;
    p.bias_by_row = true;
    p.row_stride = 1, p.column_stride = g.n;
  }
  p.k = g.k;
  p.bias = HasBias(g.epilogue) ? bias : nullptr;
  p.alpha = alpha;
  p.beta = beta;
  p.activation = ActivationOf(g.epilogue);
  p.c = c;
  p.d = bf16_d;
  if (!SmallRowsFit(p)) return std::nullopt;
  return p;
}

// A bf16 product with a weight matrix B as the split-k kernel runs it (split_k_gemm.h): alpha 1,
// no C, A's bf16 copy or room to convert A into ctx.bf16_operands (a is then that buffer, A to
// be converted into it at launch); nullopt when the kernel does not take it.
std::optional<SplitKProduct> SplitKProductOf(const DeviceContext& ctx, const GemmShape& g, const float* a,
                                             const float* b, float* c, float alpha, float beta, const float* bias,
                                             void* bf16_d) {
  if (!Bf16Products(ctx.precision) || g.batch != 1 || g.trans_a || alpha != 1.0f || beta != 0.0f) return std::nullopt;
  const bool bf16_a = ctx.bf16_a && ctx.bf16_a_source == a;
  if (!bf16_a && Bf16OperandBytes(g.m * g.k) > ctx.bf16_operand_bytes) return std::nullopt;
  SplitKProduct p;
  p.a = bf16_a ? ctx.bf16_a : ctx.bf16_operands;
  p.w = Bf16WeightRows(ctx, b, g.trans_b);
  p.bias = HasBias(g.epilogue) ? bias : nullptr;
  p.activation = ActivationOf(g.epilogue);
  p.m = g.m, p.n = g.n, p.k = g.k;
  p.c = c, p.d = bf16_d;
  if (!p.w || !SplitKFits(p)) return std::nullopt;
  return p;
}

// A bf16 product whose k is not a multiple of 8 over a weight with a k-padded copy (device.h's
// PaddedK), A in fp32: that copy, else null. Sgemm then pads A's rows too, and cuBLASLt's Hopper
// kernels take the product; the zeros change no sum. A that exists only as its producer's bf16
// copy is not padded (no product in the zoo has one).
const void* PaddedWeight(const DeviceContext& ctx, const GemmShape& g, const float* a, const float* b) {
  if (!Bf16Products(ctx.precision) || g.batch != 1 || g.trans_a || g.k == PaddedK(g.k)) return nullptr;
  if (ctx.bf16_a && ctx.bf16_a_source == a) return nullptr;
  return Bf16Copy(ctx.bf16_weights_padded, b);
}

// The bf16 operands of a product: a weight matrix's bf16 copy when there is one, else the fp32
// operand converted into the executor's operand buffer (A first, then B, each 256-byte aligned).
Status ConvertOperands(DeviceContext& ctx, const GemmShape& g, const float* a, const float* b, const void*& op_a,
                       const void*& op_b) {
  auto extent = [&](int64_t matrix, int64_t stride) {
    return g.batch > 1 && stride > 0 ? stride * (g.batch - 1) + matrix : matrix;
  };
  int64_t na = extent(g.m * g.k, g.stride_a), nb = extent(g.k * g.n, g.stride_b);
  auto* buffer = static_cast<uint8_t*>(ctx.bf16_operands);
  size_t a_bytes = Bf16OperandBytes(na);
  const void* weight = Bf16Weight(ctx, b);
  bool converted_b = weight == nullptr;
  if (a_bytes + (converted_b ? Bf16OperandBytes(nb) : 0) > ctx.bf16_operand_bytes) {
    return Internal("the bf16 operand buffer is smaller than a product needs");
  }
  if (ctx.bf16_a && ctx.bf16_a_source == a) {  // its producer wrote the bf16 copy (bf16_copies.h)
    op_a = ctx.bf16_a;
  } else {
    RANKD_RETURN_IF_ERROR(ConvertToBf16(ctx.stream, a, buffer, na));
    op_a = buffer;
  }
  if (converted_b) {
    RANKD_RETURN_IF_ERROR(ConvertToBf16(ctx.stream, b, buffer + a_bytes, nb));
    op_b = buffer + a_bytes;
  } else {
    op_b = weight;
  }
  return Status::Ok();
}

void Destroy(GemmCache::Entry& e) {
  if (e.a) cublasLtMatrixLayoutDestroy(e.a);
  if (e.b) cublasLtMatrixLayoutDestroy(e.b);
  if (e.c) cublasLtMatrixLayoutDestroy(e.c);
  if (e.op) cublasLtMatmulDescDestroy(e.op);
}

}  // namespace

void EnableGemmTuning(bool on) { tuning_on.store(on, std::memory_order_relaxed); }

GemmTunings CountGemmTunings() {
  TimedChoices& timed = Timed();
  MutexLock lock(timed.mu);
  return timed.counts;
}

const void* Bf16WeightRows(const DeviceContext& ctx, const float* b, bool trans_b) {
  return trans_b ? Bf16Copy(ctx.bf16_weights, b) : Bf16Copy(ctx.bf16_weights_nk, b);
}

bool OwnProductKernel(const DeviceContext& ctx, const GemmShape& shape, const float* a, const float* b, float* c) {
  return TakesShortK(ctx, shape) || FewRowsProduct(ctx, shape, a, b, c, 1.0f, 0.0f, nullptr, nullptr).has_value();
}

GemmCache::~GemmCache() {
  for (auto& [key, e] : entries) Destroy(e);
}

Status Sgemm(DeviceContext& ctx, const GemmShape& g, const float* a, const float* b, float* c, float alpha, float beta,
             const float* bias, void* bf16_d) {
  if (!Bf16Products(ctx.precision)) bf16_d = nullptr;
  if (g.m == 0 || g.n == 0 || g.batch == 0) return Status::Ok();
  if (g.k == 0) {  // an empty product: only C = 0 is supported without a kernel of its own
    if (beta != 0.0f || g.epilogue != Epilogue::kNone)
      return Unimplemented("a product over an empty dimension with C or an epilogue");
    RANKD_RETURN_IF_ERROR(
        Check(cudaMemsetAsync(c, 0, static_cast<size_t>(g.m * g.n * g.batch) * sizeof(float), ctx.stream),
              "cudaMemsetAsync"));
    return bf16_d ? ConvertToBf16(ctx.stream, c, bf16_d, g.m * g.n * g.batch) : Status::Ok();
  }
  if (TakesShortK(ctx, g)) {
    ShortKProduct p;
    p.a_bf16 = ctx.bf16_a && ctx.bf16_a_source == a;  // its producer wrote only that, maybe
    p.a = p.a_bf16 ? ctx.bf16_a : static_cast<const void*>(a);
    p.w = b, p.w_nk = g.trans_b;
    p.bias = HasBias(g.epilogue) ? bias : nullptr;
    p.alpha = alpha, p.beta = beta;
    p.activation = ActivationOf(g.epilogue);
    p.m = g.m, p.n = g.n, p.k = g.k;
    p.c = c, p.d = bf16_d;
    return ShortKGemm(ctx.stream, p);
  }
  if (auto few = FewRowsProduct(ctx, g, a, b, c, alpha, beta, bias, bf16_d)) return SmallRowsGemm(ctx.stream, *few);
  if (auto split = SplitKProductOf(ctx, g, a, b, c, alpha, beta, bias, bf16_d)) {
    if (split->a == ctx.bf16_operands)
      RANKD_RETURN_IF_ERROR(ConvertToBf16(ctx.stream, a, ctx.bf16_operands, g.m * g.k));
    return SplitKGemm(ctx.stream, *split);
  }
  const void* op_a = a;
  const void* op_b = b;
  GemmShape shape = g;  // as cuBLASLt runs it: k padded, maybe
  if (const void* padded = PaddedWeight(ctx, g, a, b)) {
    shape.k = PaddedK(g.k);
    if (Bf16OperandBytes(g.m * shape.k) > ctx.bf16_operand_bytes)
      return Internal("the bf16 operand buffer is smaller than a product needs");
    RANKD_RETURN_IF_ERROR(ConvertToBf16Padded(ctx.stream, a, ctx.bf16_operands, g.m, g.k, shape.k));
    op_a = ctx.bf16_operands;
    op_b = padded;
  } else if (Bf16Products(ctx.precision)) {
    RANKD_RETURN_IF_ERROR(ConvertOperands(ctx, g, a, b, op_a, op_b));
  }
  // The entry for a bf16 output, or for an fp32 one when there is none or cuBLASLt has no
  // algorithm for it. A bf16 output takes the bias's bf16 copy where there is one: cuBLASLt may
  // have no algorithm for a bf16 output with an fp32 bias (seen on the H100).
  using Slot = std::pair<const GemmCache::Key, GemmCache::Entry>;
  auto entry = [&](GemmOutput out, void* d) -> StatusOr<Slot*> {
    int alignment = std::min({Alignment(op_a), Alignment(op_b), Alignment(d)});
    GemmCache::Key key{shape.trans_a,
                       shape.trans_b,
                       shape.m,
                       shape.n,
                       shape.k,
                       shape.batch,
                       shape.stride_a,
                       shape.stride_b,
                       shape.stride_c,
                       static_cast<int>(shape.epilogue),
                       alignment,
                       static_cast<int>(ctx.precision),
                       static_cast<int>(out)};
    auto it = ctx.gemm->entries.find(key);
    if (it == ctx.gemm->entries.end()) {
      GemmCache::Entry e;
      Status s = Build(ctx, shape, alignment, out, e);
      if (!s.ok()) {
        Destroy(e);
        if (out == GemmOutput::kF32) return s;
        e = GemmCache::Entry{};
        e.unsupported = true;
      }
      it = ctx.gemm->entries.emplace(key, e).first;
    }
    return &*it;
  };
  Slot* slot = nullptr;
  const void* bf16_bias = nullptr;
  const bool sigmoid = ActivationOf(g.epilogue) == Activation::kSigmoid;  // applied after, in fp32
  if (bf16_d && beta == 0.0f && !sigmoid) {
    bf16_bias = bias ? Bf16Weight(ctx, bias) : nullptr;
    RANKD_ASSIGN_OR_RETURN(slot, entry(bf16_bias ? GemmOutput::kBf16 : GemmOutput::kBf16F32Bias, bf16_d));
    if (slot->second.unsupported) slot = nullptr;
  }
  const bool to_bf16 = slot != nullptr;
  if (!to_bf16) {
    RANKD_ASSIGN_OR_RETURN(slot, entry(GemmOutput::kF32, c));
  }
  GemmCache::Entry* e = &slot->second;
  void* d = to_bf16 ? bf16_d : static_cast<void*>(c);
  const void* bias_ptr = to_bf16 && bf16_bias ? bf16_bias : bias;
  if (bias_ptr) {
    RANKD_LT_RETURN(
        cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)));
  }
  if (!e->untried.empty() && beta == 0.0f)
    RANKD_RETURN_IF_ERROR(ChooseFastest(ctx, slot->first, *e, &alpha, &beta, op_a, op_b, d));
  RANKD_LT_RETURN(cublasLtMatmul(ctx.lt, e->op, &alpha, op_b, e->b, op_a, e->a, &beta, d, e->c, d, e->c, &e->algo,
                                 ctx.lt_workspace, ctx.lt_workspace_bytes, ctx.stream));
  if (sigmoid) return SigmoidInPlace(ctx.stream, c, bf16_d, g.m * g.n * g.batch);
  if (bf16_d && !to_bf16) return ConvertToBf16(ctx.stream, c, bf16_d, g.m * g.n * g.batch);
  return Status::Ok();
}

}  // namespace rankd::cuda
