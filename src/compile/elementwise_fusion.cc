// Chains of element-wise ops become one FusedElementwise node: one pass over the output instead of
// one per op, and no intermediate written and read back (model/ops/elementwise_program.h).
//
// A group grows from its last op (the root) towards its producers. A producer joins when it is an
// FP32 element-wise op, its output has the root's shape (so nothing is computed more often than
// before) and every reader of its output is already in the group (so nothing outside needs the
// intermediate). The group then runs where the root ran: its outside inputs are all computed
// before any of its members.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "compile/passes.h"
#include "model/ops/elementwise_program.h"

namespace rankd {
namespace {

class Fuser {
 public:
  Fuser(Graph& graph, const std::vector<PlanValue>& shapes)
      : graph_(graph),
        shapes_(shapes),
        producers_(graph.Producers()),
        uses_(graph.UseCounts()),
        group_(graph.nodes.size(), -1) {}

  int Run() {
    int fused = 0;
    std::vector<bool> removed(graph_.nodes.size(), false);
    for (size_t r = graph_.nodes.size(); r-- > 0;) {
      if (group_[r] >= 0 || !Fusible(static_cast<int>(r))) continue;
      std::vector<int> members = Grow(static_cast<int>(r));
      if (members.size() < 2) continue;
      if (!Rewrite(members)) continue;
      for (int m : members) removed[static_cast<size_t>(m)] = m != static_cast<int>(r);
      ++fused;
    }
    if (fused > 0) graph_.EraseNodes(removed);
    return fused;
  }

 private:
  const PlanValue* Planned(int v) const {
    return v >= 0 && static_cast<size_t>(v) < shapes_.size() ? &shapes_[static_cast<size_t>(v)] : nullptr;
  }
  bool Fp32(int v) const {
    const PlanValue* s = Planned(v);
    return s && s->dtype == DType::kF32;
  }

  bool Fusible(int n) const {
    const Node& node = graph_.nodes[static_cast<size_t>(n)];
    EwOp op;
    if (!EwOpFromName(node.op, &op) || node.outputs.size() != 1 || !Fp32(node.outputs[0])) return false;
    if (Planned(node.outputs[0])->shape.size() > static_cast<size_t>(kMaxFusedRank)) return false;
    int arity = static_cast<int>(node.inputs.size());
    if (op == EwOp::kClip ? arity < 1 || arity > 3 : arity != EwOpArity(op)) return false;
    for (int i = 0; i < arity; ++i) {
      int v = node.inputs[static_cast<size_t>(i)];
      if (v < 0 ? op != EwOp::kClip || i == 0 : !Fp32(v)) return false;
    }
    return true;
  }

  // The group rooted at `root`: members in graph order.
  std::vector<int> Grow(int root) {
    const Node& r = graph_.nodes[static_cast<size_t>(root)];
    const Shape& shape = Planned(r.outputs[0])->shape;
    std::vector<int> members{root};
    std::map<int, int> group_reads;  // value -> reads of it by members
    auto add_reads = [&](int n) {
      for (int v : graph_.nodes[static_cast<size_t>(n)].inputs) {
        if (v >= 0) ++group_reads[v];
      }
    };
    add_reads(root);
    group_[static_cast<size_t>(root)] = root;
    for (bool grew = true; grew && static_cast<int>(members.size()) < kMaxFusedOps;) {
      grew = false;
      for (const auto& [v, reads] : group_reads) {
        int p = producers_[static_cast<size_t>(v)];
        if (p < 0 || group_[static_cast<size_t>(p)] >= 0 || reads != uses_[static_cast<size_t>(v)]) continue;
        if (!Fusible(p) || Planned(v)->shape != shape) continue;
        members.push_back(p);
        group_[static_cast<size_t>(p)] = root;
        add_reads(p);
        if (CountInputs(members) > kMaxFusedInputs) {  // too wide: leave this producer out
          members.pop_back();
          group_[static_cast<size_t>(p)] = -1;
          for (int u : graph_.nodes[static_cast<size_t>(p)].inputs) {
            if (u >= 0) --group_reads[u];
          }
          continue;
        }
        grew = true;
        break;  // group_reads changed
      }
    }
    std::sort(members.begin(), members.end());
    if (members.size() < 2) group_[static_cast<size_t>(root)] = -1;
    return members;
  }

  // A scalar FP32 constant becomes an immediate in the program rather than an input.
  bool Immediate(int v, float* value) const {
    const Tensor* t = graph_.FindConstant(v);
    std::optional<double> scalar = graph_.ScalarConstant(v);
    if (!t || t->dtype() != DType::kF32 || !scalar || std::isnan(*scalar)) return false;
    *value = static_cast<float>(*scalar);
    return true;
  }

  // Distinct outside values the members read (immediates aside).
  int CountInputs(const std::vector<int>& members) const {
    std::vector<int> outside;
    for (int m : members) {
      for (int v : graph_.nodes[static_cast<size_t>(m)].inputs) {
        float unused;
        if (v < 0 || Immediate(v, &unused)) continue;
        int p = producers_[static_cast<size_t>(v)];
        bool inside = p >= 0 && std::find(members.begin(), members.end(), p) != members.end();
        if (!inside && std::find(outside.begin(), outside.end(), v) == outside.end()) outside.push_back(v);
      }
    }
    return static_cast<int>(outside.size());
  }

  // Replaces the last member (the root) by the fused node; the caller removes the others.
  bool Rewrite(const std::vector<int>& members) {
    ElementwiseProgram program;
    std::vector<int> inputs;
    std::map<int, int> temp_of;  // member output value -> temporary
    for (int m : members) {
      const Node& node = graph_.nodes[static_cast<size_t>(m)];
      EwInstruction in;
      EwOpFromName(node.op, &in.op);
      for (size_t i = 0; i < 3 && (i < node.inputs.size() || in.op == EwOp::kClip); ++i) {
        int v = i < node.inputs.size() ? node.inputs[i] : -1;
        EwOperand o;
        if (v < 0) {  // Clip's omitted bound
          o.kind = EwOperand::kImmediate;
          o.value = i == 1 ? std::numeric_limits<float>::lowest() : std::numeric_limits<float>::max();
        } else if (auto t = temp_of.find(v); t != temp_of.end()) {
          o.kind = EwOperand::kTemp;
          o.index = t->second;
        } else if (Immediate(v, &o.value)) {
          o.kind = EwOperand::kImmediate;
        } else {
          auto at = std::find(inputs.begin(), inputs.end(), v);
          o.kind = EwOperand::kInput;
          o.index = static_cast<int>(at - inputs.begin());
          if (at == inputs.end()) inputs.push_back(v);
        }
        in.operands.push_back(o);
      }
      temp_of[node.outputs[0]] = static_cast<int>(program.code.size());
      program.code.push_back(std::move(in));
    }
    if (inputs.empty() || inputs.size() > static_cast<size_t>(kMaxFusedInputs))
      return false;  // all-constant: folding's job
    Node& root = graph_.nodes[static_cast<size_t>(members.back())];
    Node fused;
    fused.op = "FusedElementwise";
    fused.name = root.name + ".fused" + std::to_string(members.size());
    fused.inputs = inputs;
    fused.outputs = root.outputs;
    fused.attrs["program"] = program.ToString();
    root = std::move(fused);
    return true;
  }

  Graph& graph_;
  const std::vector<PlanValue>& shapes_;
  std::vector<int> producers_, uses_;
  std::vector<int> group_;  // node -> its group's root, -1 while in none
};

}  // namespace

int FuseElementwiseChains(Graph& graph, const std::vector<PlanValue>& shapes) { return Fuser(graph, shapes).Run(); }

}  // namespace rankd
