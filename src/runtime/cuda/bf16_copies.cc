#include "runtime/cuda/bf16_copies.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <string>

#include "compile/plan.h"

namespace rankd::cuda {
namespace {

std::atomic<bool> enabled{true};

bool IsProduct(const std::string& op) { return op == "MatMul" || op == "Gemm"; }

constexpr int64_t kAlign = 256;

struct Copy {
  int producer = -1, last_reader = -1;
  int64_t bytes = 0, offset = -1;
};

}  // namespace

void EnableBf16Copies(bool on) { enabled = on; }

int Bf16CopyInput(const Node& node, int slot) {
  return slot > 0 && IsProduct(node.op) && node.HasInput(3) ? slot + 2 : slot;
}

Bf16Copies PlanBf16Copies(const Plan& plan, bool bf16_activations) {
  const auto& steps = plan.steps();
  const auto& values = plan.values();
  const Graph& graph = plan.graph();
  Bf16Copies out;
  out.written.assign(steps.size(), -1);
  out.alone.assign(steps.size(), false);
  out.read.assign(steps.size(), -1);
  out.read_second.assign(steps.size(), -1);
  out.read_third.assign(steps.size(), -1);
  if (!enabled) return out;
  auto root = [&](int v) { return plan.RootOf(v); };
  auto node_of = [&](const PlanStep& step) -> const Node& { return graph.nodes[static_cast<size_t>(step.node)]; };
  // A MulAdd of FP32 operands all of its result's shape: its kernel reads any operand as a bf16
  // copy and may write its result as the copy alone (elementwise.cu).
  auto same_shape_muladd = [&](const PlanStep& step) {
    if (node_of(step).op != "MulAdd" || step.inputs.size() != 3 || step.outputs.empty() || step.outputs[0] < 0)
      return false;
    const PlanValue& o = values[static_cast<size_t>(step.outputs[0])];
    return std::all_of(step.inputs.begin(), step.inputs.end(),
                       [&](int in) {
                         return in >= 0 && values[static_cast<size_t>(in)].dtype == DType::kF32 &&
                                values[static_cast<size_t>(in)].shape == o.shape;
                       }) &&
           o.dtype == DType::kF32;
  };
  // Per step: whether it is a product, and which input each copy slot reads (-1: none): a
  // product's A; a MulAdd's two factors, and its addend with bf16 activations; a product with a
  // multiply-add epilogue's m and c too, with bf16 activations.
  std::vector<bool> product(steps.size(), false);
  std::vector<std::array<int, 3>> slot_input(steps.size(), {-1, -1, -1});
  for (size_t s = 0; s < steps.size(); ++s) {
    const Node& node = node_of(steps[s]);
    product[s] = IsProduct(node.op);
    const int slots = product[s]                    ? (bf16_activations && node.HasInput(3) ? 3 : 1)
                      : same_shape_muladd(steps[s]) ? (bf16_activations ? 3 : 2)
                                                    : 0;
    for (int slot = 0; slot < slots; ++slot) slot_input[s][static_cast<size_t>(slot)] = Bf16CopyInput(node, slot);
  }
  auto copy_readable = [&](size_t s, int input) {
    return std::find(slot_input[s].begin(), slot_input[s].end(), input) != slot_input[s].end();
  };
  // Values (roots) whose every reader is a product reading them as A (only_products_read), or
  // that or a same-shape MulAdd reading them as a factor (only_copy_readers); no graph output.
  std::vector<bool> only_products_read(values.size(), true), only_copy_readers(values.size(), true);
  for (int o : graph.outputs)
    only_products_read[static_cast<size_t>(root(o))] = only_copy_readers[static_cast<size_t>(root(o))] = false;
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (step.inputs[i] < 0) continue;
      const auto v = static_cast<size_t>(root(step.inputs[i]));
      if (!(product[s] && i == 0)) only_products_read[v] = false;
      if (!copy_readable(s, static_cast<int>(i))) only_copy_readers[v] = false;
    }
  }
  // value (its root) -> the step writing its copy, and whether that step writes the copy alone.
  std::vector<int> writer(values.size(), -1);
  std::vector<bool> alone(values.size(), false);
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    if (step.outputs.empty() || step.outputs[0] < 0) continue;
    const auto v = static_cast<size_t>(step.outputs[0]);
    if (values[v].storage != PlanStorage::kWorkspace || values[v].dtype != DType::kF32) continue;
    const std::string& op = node_of(step).op;
    if (op == "ConcatEmbeddingBags" || op == "MulAdd") {
      writer[v] = static_cast<int>(s);
      const bool same_shape = slot_input[s][0] >= 0;
      alone[v] = bf16_activations ? only_copy_readers[v] && (op != "MulAdd" || same_shape)
                                  : op == "MulAdd" && only_products_read[v] && same_shape;
    } else if (product[s] && only_copy_readers[v]) {
      writer[v] = static_cast<int>(s);
      alone[v] = true;
    }
  }
  // A product reads any producer's copy; a MulAdd reads a factor's copy only where no fp32 result
  // was written, so that it rounds nothing the producer did not (bf16 activations: any copy).
  auto reads_copy = [&](size_t s, size_t slot) {
    const int i = slot_input[s][slot];
    if (i < 0 || steps[s].inputs[static_cast<size_t>(i)] < 0) return false;
    const auto v = static_cast<size_t>(root(steps[s].inputs[static_cast<size_t>(i)]));
    return writer[v] >= 0 && (product[s] || alone[v] || bf16_activations);
  };
  auto slot_value = [&](size_t s, size_t slot) {
    return root(steps[s].inputs[static_cast<size_t>(slot_input[s][slot])]);
  };
  std::vector<Copy> copies;
  std::vector<int> copy_of(values.size(), -1);  // root value -> index in copies
  for (size_t s = 0; s < steps.size(); ++s) {
    for (size_t slot = 0; slot < 3; ++slot) {
      if (!reads_copy(s, slot)) continue;
      const int v = slot_value(s, slot);
      int& c = copy_of[static_cast<size_t>(v)];
      if (c < 0) {
        c = static_cast<int>(copies.size());
        int64_t elements = NumElements(values[static_cast<size_t>(v)].shape);
        copies.push_back({writer[static_cast<size_t>(v)], -1, (elements * 2 + kAlign - 1) / kAlign * kAlign, -1});
      }
      copies[static_cast<size_t>(c)].last_reader = static_cast<int>(s);
    }
  }
  // First fit: a copy goes at the lowest offset clear of every placed copy alive at the same time
  // (from its producer to its last reader), or of every placed copy where the plan keeps its
  // values apart (Plan::separate_rooms: steps may then run side by side).
  for (size_t i = 0; i < copies.size(); ++i) {
    Copy& c = copies[i];
    std::vector<std::pair<int64_t, int64_t>> taken;  // (offset, end) of overlapping copies
    for (size_t j = 0; j < i; ++j) {
      const Copy& o = copies[j];
      const bool alive = o.producer <= c.last_reader && c.producer <= o.last_reader;
      if (plan.separate_rooms() || alive) taken.push_back({o.offset, o.offset + o.bytes});
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
      out.alone[s] = alone[static_cast<size_t>(step.outputs[0])];
    }
    for (size_t slot = 0; slot < 3; ++slot) {
      if (!reads_copy(s, slot)) continue;
      std::vector<int64_t>& read = slot == 0 ? out.read : slot == 1 ? out.read_second : out.read_third;
      read[s] = copies[static_cast<size_t>(copy_of[static_cast<size_t>(slot_value(s, slot))])].offset;
    }
  }
  return out;
}

}  // namespace rankd::cuda
