// The CPU's FusedElementwise: the program (model/ops/elementwise_program.h) run as a fused loop.
//
// The output is walked in innermost rows against the broadcast inputs (broadcast.h), and each row
// in tiles of kTile elements: every op of the program runs over the tile into a small buffer that
// stays in L1, so the intermediates never reach memory, and each op's loop vectorises.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/broadcast.h"
#include "backend/cpu/kernels.h"
#include "model/ops/elementwise_program.h"

namespace rankd::cpu {
namespace {

constexpr int64_t kTile = 256;

// d[i] = op(a[i], b[i], c[i]) for i < n, as the unfused kernels compute it (elementwise.cc).
void Apply(EwOp op, const float* a, const float* b, const float* c, float* d, int64_t n) {
  switch (op) {
    case EwOp::kAdd:
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] + b[i];
      break;
    case EwOp::kSub:
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] - b[i];
      break;
    case EwOp::kMul:
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] * b[i];
      break;
    case EwOp::kDiv:
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] / b[i];
      break;
    case EwOp::kPow:
      for (int64_t i = 0; i < n; ++i) d[i] = b[i] == 2.0f ? a[i] * a[i] : std::pow(a[i], b[i]);
      break;
    case EwOp::kMax:
    case EwOp::kMin: {
      const bool is_max = op == EwOp::kMax;
      for (int64_t i = 0; i < n; ++i) {
        float x = a[i], y = b[i];
        d[i] = std::isnan(x) || std::isnan(y) ? std::numeric_limits<float>::quiet_NaN()
               : is_max                       ? std::max(x, y)
                                              : std::min(x, y);
      }
      break;
    }
    case EwOp::kMulAdd:
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] * b[i] + c[i];
      break;
    case EwOp::kClip:
      for (int64_t i = 0; i < n; ++i) d[i] = std::min(std::max(a[i], b[i]), c[i]);
      break;
    case EwOp::kNeg:
      for (int64_t i = 0; i < n; ++i) d[i] = -a[i];
      break;
    case EwOp::kRelu:
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] > 0.0f ? a[i] : 0.0f;
      break;
    case EwOp::kAbs:
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] < 0.0f ? -a[i] : a[i];
      break;
    case EwOp::kSigmoid:
      for (int64_t i = 0; i < n; ++i) d[i] = 1.0f / (1.0f + std::exp(-a[i]));
      break;
    case EwOp::kTanh:
      for (int64_t i = 0; i < n; ++i) d[i] = std::tanh(a[i]);
      break;
    case EwOp::kErf:
      for (int64_t i = 0; i < n; ++i) d[i] = std::erf(a[i]);
      break;
    case EwOp::kSqrt:
      for (int64_t i = 0; i < n; ++i) d[i] = std::sqrt(a[i]);
      break;
    case EwOp::kExp:
      for (int64_t i = 0; i < n; ++i) d[i] = std::exp(a[i]);
      break;
    case EwOp::kLog:
      for (int64_t i = 0; i < n; ++i) d[i] = std::log(a[i]);
      break;
    case EwOp::kReciprocal:
      for (int64_t i = 0; i < n; ++i) d[i] = 1.0f / a[i];
      break;
    case EwOp::kFloor:
      for (int64_t i = 0; i < n; ++i) d[i] = std::floor(a[i]);
      break;
    case EwOp::kCeil:
      for (int64_t i = 0; i < n; ++i) d[i] = std::ceil(a[i]);
      break;
  }
}

// The program and its buffer layout, worked out once per plan step. Buffer slots of kTile floats:
// one per op's result, then one per input broadcast along a row, then one per immediate operand.
struct FusedLoop final : KernelState {
  ElementwiseProgram program;
  std::vector<std::array<int, 3>> slot;           // slot[j][a]: operand a of op j; -1 for a varying input
  std::vector<std::pair<int, float>> immediates;  // (slot, value)
  size_t floats = 0;                              // the buffer's size
};

StatusOr<std::shared_ptr<const KernelState>> PrepareFusedLoop(const Node& node) {
  auto loop = std::make_shared<FusedLoop>();
  RANKD_ASSIGN_OR_RETURN(loop->program, ElementwiseProgram::Parse(node.GetString("program", ""), node.NumInputs()));
  const size_t ops = loop->program.code.size();
  loop->slot.assign(ops, {-1, -1, -1});
  int next = static_cast<int>(ops) + node.NumInputs();
  for (size_t j = 0; j < ops; ++j) {
    const std::vector<EwOperand>& operands = loop->program.code[j].operands;
    for (size_t a = 0; a < operands.size(); ++a) {
      if (operands[a].kind == EwOperand::kTemp) loop->slot[j][a] = operands[a].index;
      if (operands[a].kind == EwOperand::kImmediate) {
        loop->immediates.push_back({next, operands[a].value});
        loop->slot[j][a] = next++;
      }
    }
  }
  loop->floats = static_cast<size_t>(next) * kTile;
  return std::shared_ptr<const KernelState>(std::move(loop));
}

Status FusedElementwise(const KernelArgs& k) {
  const auto* loop = dynamic_cast<const FusedLoop*>(k.state);
  if (!loop) return Internal(k.node.Describe() + ": run without its prepared program");
  const ElementwiseProgram& program = loop->program;
  const auto& slot = loop->slot;
  const int num_inputs = static_cast<int>(k.in.size());
  Tensor& out = k.Out(0);
  static const Shape kScalar;
  std::array<const Shape*, kMaxFusedInputs> shapes;
  std::array<const float*, kMaxFusedInputs> data{};
  for (int i = 0; i < kMaxFusedInputs; ++i) {
    shapes[static_cast<size_t>(i)] = i < num_inputs ? &k.In(i).shape() : &kScalar;
    if (i < num_inputs) data[static_cast<size_t>(i)] = k.In(i).data<float>();
  }
  const size_t ops = program.code.size();
  const size_t floats = loop->floats;
  float* po = out.data<float>();
  auto layout = MakeBroadcastLayout<kMaxFusedInputs>(out.shape(), shapes);
  ForEachRow<kMaxFusedInputs>(layout, [&](int64_t o, const std::array<int64_t, kMaxFusedInputs>& off, int64_t n,
                                          const std::array<int64_t, kMaxFusedInputs>& stride) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < floats) buffer.resize(floats);
    float* base = buffer.data();
    const int64_t first = std::min(n, kTile);
    for (int i = 0; i < num_inputs; ++i) {  // an input broadcast along the row: one value, spread once
      size_t u = static_cast<size_t>(i);
      if (stride[u] == 0) std::fill_n(base + (ops + u) * kTile, first, data[u][off[u]]);
    }
    for (auto [at, value] : loop->immediates) std::fill_n(base + static_cast<size_t>(at) * kTile, first, value);
    for (int64_t s = 0; s < n; s += kTile) {
      const int64_t len = std::min(kTile, n - s);
      for (size_t j = 0; j < ops; ++j) {
        const EwInstruction& in = program.code[j];
        std::array<const float*, 3> p{};
        for (size_t a = 0; a < in.operands.size(); ++a) {
          if (slot[j][a] >= 0) {
            p[a] = base + static_cast<size_t>(slot[j][a]) * kTile;
          } else {
            size_t i = static_cast<size_t>(in.operands[a].index);
            p[a] = stride[i] ? data[i] + off[i] + s : base + (ops + i) * kTile;
          }
        }
        float* d = j + 1 == ops ? po + o + s : base + j * kTile;
        Apply(in.op, p[0], p[1], p[2], d, len);
      }
    }
  });
  return Status::Ok();
}

}  // namespace

void AppendFusedElementwiseKernel(KernelTable& out) {
  out["FusedElementwise"] = Kernel(FusedElementwise, PrepareFusedLoop);
}

}  // namespace rankd::cpu
