// The CUDA FusedElementwise: each program (model/ops/elementwise_program.h) becomes its own kernel,
// written out as straight-line CUDA source at load time and compiled with NVRTC
// (runtime_compiler.h). One thread computes one output element: it reads each input once at its
// broadcast offset, keeps every intermediate in registers and writes the result.
#include <cstring>

#include "backend/broadcast.h"
#include "backend/cuda/device.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/runtime_compiler.h"
#include "model/ops/elementwise_program.h"

namespace rankd::cuda {
namespace {

// The kernel's one parameter; the generated source declares the same struct.
struct FusedArgs {
  const float* in[kMaxFusedInputs];
  float* out;
  long long n;
  int rank;  // collapsed output dims
  long long dims[kMaxFusedRank];
  long long strides[kMaxFusedInputs][kMaxFusedRank];  // per input, per collapsed dim; 0 broadcasts
  unsigned dense;                                     // bit k: input k has the output's layout
};

constexpr const char* kPrelude = R"(
struct FusedArgs {
  const float* in[8];
  float* out;
  long long n;
  int rank;
  long long dims[6];
  long long strides[8][6];
  unsigned dense;
};
__device__ __forceinline__ float rk_max(float x, float y) { return x != x || y != y ? __int_as_float(0x7fc00000) : (x < y ? y : x); }
__device__ __forceinline__ float rk_min(float x, float y) { return x != x || y != y ? __int_as_float(0x7fc00000) : (y < x ? y : x); }
__device__ __forceinline__ float rk_clip(float x, float lo, float hi) { float t = x < lo ? lo : x; return hi < t ? hi : t; }
__device__ __forceinline__ float rk_pow(float x, float y) { return y == 2.0f ? x * x : powf(x, y); }
)";
static_assert(kMaxFusedInputs == 8 && kMaxFusedRank == 6, "the generated FusedArgs spells these out");

std::string Operand(const EwOperand& o) {
  if (o.kind == EwOperand::kInput) return "x" + std::to_string(o.index);
  if (o.kind == EwOperand::kTemp) return "t" + std::to_string(o.index);
  uint32_t bits;
  std::memcpy(&bits, &o.value, 4);
  return "__int_as_float(" + std::to_string(bits) + ")";
}

std::string Expression(const EwInstruction& in) {
  const std::string a = Operand(in.operands[0]);
  const std::string b = in.operands.size() > 1 ? Operand(in.operands[1]) : "";
  const std::string c = in.operands.size() > 2 ? Operand(in.operands[2]) : "";
  switch (in.op) {
    case EwOp::kAdd:
      return a + " + " + b;
    case EwOp::kSub:
      return a + " - " + b;
    case EwOp::kMul:
      return a + " * " + b;
    case EwOp::kDiv:
      return a + " / " + b;
    case EwOp::kPow:
      return "rk_pow(" + a + ", " + b + ")";
    case EwOp::kMax:
      return "rk_max(" + a + ", " + b + ")";
    case EwOp::kMin:
      return "rk_min(" + a + ", " + b + ")";
    case EwOp::kMulAdd:
      return a + " * " + b + " + " + c;
    case EwOp::kClip:
      return "rk_clip(" + a + ", " + b + ", " + c + ")";
    case EwOp::kNeg:
      return "-" + a;
    case EwOp::kRelu:
      return a + " > 0.0f ? " + a + " : 0.0f";
    case EwOp::kAbs:
      return a + " < 0.0f ? -" + a + " : " + a;
    case EwOp::kSigmoid:
      return "1.0f / (1.0f + expf(-" + a + "))";
    case EwOp::kTanh:
      return "tanhf(" + a + ")";
    case EwOp::kErf:
      return "erff(" + a + ")";
    case EwOp::kSqrt:
      return "sqrtf(" + a + ")";
    case EwOp::kExp:
      return "expf(" + a + ")";
    case EwOp::kLog:
      return "logf(" + a + ")";
    case EwOp::kReciprocal:
      return "1.0f / " + a;
    case EwOp::kFloor:
      return "floorf(" + a + ")";
    case EwOp::kCeil:
      return "ceilf(" + a + ")";
  }
  return "0.0f";
}

// The source of the kernel "rankd_fused" for `program` over `inputs` inputs.
std::string Source(const ElementwiseProgram& program, int inputs) {
  std::string s = kPrelude;
  const std::string all = std::to_string((1u << inputs) - 1);
  s += "extern \"C\" __global__ void __launch_bounds__(256) rankd_fused(const FusedArgs a) {\n";
  s += "  const long long step = (long long)gridDim.x * blockDim.x;\n";
  s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step) {\n";
  for (int k = 0; k < inputs; ++k) s += "    long long o" + std::to_string(k) + " = i;\n";
  s += "    if (a.dense != " + all + "u) {\n";
  for (int k = 0; k < inputs; ++k) s += "      o" + std::to_string(k) + " = 0;\n";
  s += "      long long r = i;\n";
  s += "      for (int d = a.rank - 1; d >= 0; --d) {\n";
  s += "        const long long c = r % a.dims[d];\n        r /= a.dims[d];\n";
  for (int k = 0; k < inputs; ++k) {
    s += "        o" + std::to_string(k) + " += c * a.strides[" + std::to_string(k) + "][d];\n";
  }
  s += "      }\n    }\n";
  for (int k = 0; k < inputs; ++k) {
    s += "    const float x" + std::to_string(k) + " = __ldg(a.in[" + std::to_string(k) + "] + o" + std::to_string(k) +
         ");\n";
  }
  for (size_t j = 0; j < program.code.size(); ++j) {
    s += "    const float t" + std::to_string(j) + " = " + Expression(program.code[j]) + ";\n";
  }
  s += "    a.out[i] = t" + std::to_string(program.code.size() - 1) + ";\n  }\n}\n";
  return s;
}

// The compiled kernel of one FusedElementwise step.
struct FusedKernel final : KernelState {
  cudaKernel_t kernel = nullptr;
};

StatusOr<cudaKernel_t> Compile(const Node& node) {
  RANKD_ASSIGN_OR_RETURN(ElementwiseProgram program,
                         ElementwiseProgram::Parse(node.GetString("program", ""), node.NumInputs()));
  return CompileKernel(Source(program, node.NumInputs()), "rankd_fused");
}

// Run once per node when the model loads (CudaBackend::PrepareModel), which compiles the kernel,
// then per plan step, which finds it in the process cache.
StatusOr<std::shared_ptr<const KernelState>> PrepareFusedKernel(const Node& node) {
  auto state = std::make_shared<FusedKernel>();
  RANKD_ASSIGN_OR_RETURN(state->kernel, Compile(node));
  return std::shared_ptr<const KernelState>(std::move(state));
}

Status FusedElementwise(const KernelArgs& k) {
  const auto* state = dynamic_cast<const FusedKernel*>(k.state);
  if (!state) return Internal(k.node.Describe() + ": run without its compiled kernel");
  cudaKernel_t kernel = state->kernel;
  Tensor& out = k.Out(0);
  FusedArgs args{};
  const int inputs = static_cast<int>(k.in.size());
  static const Shape kScalar;
  std::array<const Shape*, kMaxFusedInputs> shapes;
  for (int i = 0; i < kMaxFusedInputs; ++i) shapes[static_cast<size_t>(i)] = i < inputs ? &k.In(i).shape() : &kScalar;
  auto layout = cpu::MakeBroadcastLayout<kMaxFusedInputs>(out.shape(), shapes);
  args.rank = static_cast<int>(layout.dims.size());
  if (args.rank > kMaxFusedRank)
    return Internal(k.node.Describe() + ": output rank above " + std::to_string(kMaxFusedRank));
  for (int d = 0; d < args.rank; ++d) args.dims[d] = layout.dims[static_cast<size_t>(d)];
  for (int i = 0; i < inputs; ++i) {
    args.in[i] = k.In(i).data<float>();
    bool dense = k.In(i).size() == out.size();
    for (int d = 0; d < args.rank; ++d)
      args.strides[i][d] = layout.strides[static_cast<size_t>(i)][static_cast<size_t>(d)];
    if (dense) args.dense |= 1u << i;
  }
  args.out = out.data<float>();
  args.n = out.size();
  if (args.n == 0) return Status::Ok();
  void* params[] = {&args};
  RANKD_CUDA_RETURN(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(Blocks(args.n)), dim3(kThreads),
                                     params, 0, k.device->stream));
  return Launched(k);
}

}  // namespace

void AppendFusedElementwiseKernel(KernelTable& out) {
  out["FusedElementwise"] = Kernel(FusedElementwise, PrepareFusedKernel);
}

}  // namespace rankd::cuda
