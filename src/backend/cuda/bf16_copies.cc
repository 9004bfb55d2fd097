#include "backend/cuda/bf16_copies.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "compile/plan.h"

namespace rankd::cuda {
namespace {

std::atomic<bool> enabled{true};

bool ReadsBf16Copy(const std::string& op) { return op == "MatMul" || op == "Gemm"; }
bool WritesBf16Copy(const Node& n) { return n.op == "MulAdd" || n.op == "ConcatEmbeddingBags"; }
// A product may write its result as the bf16 copy alone (cuBLASLt's output in bf16), so only
// when nothing reads the fp32 result: every reader is a product reading it as its A operand.
bool WritesOnlyBf16Copy(const std::string& op) { return op == "MatMul" || op == "Gemm"; }

constexpr int64_t kAlign = 256;

struct Copy {
  int producer = -1, last_reader = -1;
  int64_t bytes = 0, offset = -1;
};

}  // namespace

void EnableBf16Copies(bool on) { enabled = on; }

Bf16Copies PlanBf16Copies(const Plan& plan) {
  const auto& steps = plan.steps();
  const auto& values = plan.values();
  const Graph& graph = plan.graph();
  Bf16Copies out;
  out.written.assign(steps.size(), -1);
  out.read.assign(steps.size(), -1);
  if (!enabled) return out;
  auto root = [&](int v) { return values[static_cast<size_t>(v)].storage == PlanStorage::kAlias ? values[static_cast<size_t>(v)].alias_of : v; };
  // Values (roots) whose every reader is a product reading them as A, and no graph output.
  std::vector<bool> only_products_read(values.size(), true);
  for (int out : graph.outputs) only_products_read[static_cast<size_t>(root(out))] = false;
  for (const PlanStep& step : steps) {
    const bool product = ReadsBf16Copy(graph.nodes[static_cast<size_t>(step.node)].op);
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (step.inputs[i] >= 0 && !(product && i == 0)) only_products_read[static_cast<size_t>(root(step.inputs[i]))] = false;
    }
  }
  // value (its root) -> the step writing it, for workspace values of writers.
  std::vector<int> writer(values.size(), -1);
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    if (step.outputs.empty() || step.outputs[0] < 0) continue;
    const int out = step.outputs[0];
    const PlanValue& v = values[static_cast<size_t>(out)];
    const Node& node = graph.nodes[static_cast<size_t>(step.node)];
    if (v.storage == PlanStorage::kWorkspace && v.dtype == DType::kF32 &&
        (WritesBf16Copy(node) || (WritesOnlyBf16Copy(node.op) && only_products_read[static_cast<size_t>(out)]))) {
      writer[static_cast<size_t>(out)] = static_cast<int>(s);
    }
  }
  std::vector<Copy> copies;
  std::vector<int> copy_of(values.size(), -1);  // root value -> index in copies
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    if (step.inputs.empty() || step.inputs[0] < 0 || !ReadsBf16Copy(graph.nodes[static_cast<size_t>(step.node)].op)) continue;
    const int v = root(step.inputs[0]);
    if (writer[static_cast<size_t>(v)] < 0) continue;
    int& c = copy_of[static_cast<size_t>(v)];
    if (c < 0) {
      c = static_cast<int>(copies.size());
      int64_t elements = NumElements(values[static_cast<size_t>(v)].shape);
      copies.push_back({writer[static_cast<size_t>(v)], -1, (elements * 2 + kAlign - 1) / kAlign * kAlign, -1});
    }
    copies[static_cast<size_t>(c)].last_reader = static_cast<int>(s);
  }
  // First fit: a copy goes at the lowest offset clear of every placed copy alive at the same time
  // (from its producer to its last reader).
  for (size_t i = 0; i < copies.size(); ++i) {
    Copy& c = copies[i];
    std::vector<std::pair<int64_t, int64_t>> taken;  // (offset, end) of overlapping copies
    for (size_t j = 0; j < i; ++j) {
      const Copy& o = copies[j];
      if (o.producer <= c.last_reader && c.producer <= o.last_reader) taken.push_back({o.offset, o.offset + o.bytes});
    }
    std::sort(taken.begin(), taken.end());
    int64_t at = 0;
    for (auto [begin, end] : taken) {
      if (at + c.bytes <= begin) break;
      at = std::max(at, end);
    }
    c.offset = at;
    out.bytes = std::max(out.bytes, at + c.bytes);
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    if (!step.outputs.empty() && step.outputs[0] >= 0 && copy_of[static_cast<size_t>(step.outputs[0])] >= 0) {
      out.written[s] = copies[static_cast<size_t>(copy_of[static_cast<size_t>(step.outputs[0])])].offset;
    }
    if (!step.inputs.empty() && step.inputs[0] >= 0 && ReadsBf16Copy(graph.nodes[static_cast<size_t>(step.node)].op)) {
      int c = copy_of[static_cast<size_t>(root(step.inputs[0]))];
      if (c >= 0) out.read[s] = copies[static_cast<size_t>(c)].offset;
    }
  }
  return out;
}

}  // namespace rankd::cuda
