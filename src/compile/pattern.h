// What the graph-pattern passes share (attention_fusion.cc, softmax_attention_fusion.cc): a
// read-only view of a graph with each value's producer, use count and shape at probe shapes, and
// the small matching steps built on them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compile/plan.h"
#include "model/graph.h"

namespace rankd {

class GraphPattern {
 public:
  // `shapes`: the value shapes of a plan of `g` (at probe shapes).
  GraphPattern(const Graph& g, const std::vector<PlanValue>& shapes)
      : g_(g), shapes_(shapes), producer_(g.Producers()), uses_(g.UseCounts()) {}

  const Graph& graph() const { return g_; }
  // v's shape when it is an FP32 value planned at the probe shapes, else nullptr.
  const Shape* ShapeOf(int v) const;
  // v as planned at the probe shapes (any dtype), else nullptr.
  const PlanValue* Planned(int v) const;
  // The node computing v (however often v is read), or nullptr for inputs and constants.
  const Node* Producer(int v) const;
  // How many node inputs and graph outputs read v.
  int Uses(int v) const { return v < 0 ? 0 : uses_[static_cast<size_t>(v)]; }
  // The node computing v when it is an `op` whose output v is read once; its index goes to
  // `absorbed`.
  const Node* Take(int v, const char* op, std::vector<int>& absorbed) const;
  // The node's axes (attribute, or constant input 1) normalised against `rank`; empty when unknown.
  std::vector<int64_t> Axes(const Node& n, int64_t rank) const;
  // v's per-user source and the request index when v is hoisting's Gather(source, request_index),
  // else {v, -1}.
  std::pair<int, int> Ungather(int v) const;
  // The value of a constant with exactly one element, or false.
  bool Scalar(int v, double& out) const;

 private:
  const Graph& g_;
  const std::vector<PlanValue>& shapes_;
  std::vector<int> producer_;
  std::vector<int> uses_;
};

// A match: the fused node, which takes the place of the pattern's last node, and the indices of
// the other nodes it replaces. Constants the node needs that the graph lacks (a matcher only
// reads the graph) are added by ApplyFusion and wired to the node's input `input`.
struct FusionConstant {
  int input;
  std::string name;
  Tensor value;
};
struct Fusion {
  Node node;
  std::vector<int> absorbed;
  std::vector<FusionConstant> constants;
};

// Replaces the pattern's nodes by the fused node; later nodes move up.
void ApplyFusion(Graph& graph, size_t last, Fusion fusion);

// Applies Matcher(graph, shapes).Match(node) -> std::optional<Fusion> at the first node it
// matches, again and again (a fresh matcher each time: producers and use counts changed) until
// nothing matches. Returns the number of fusions.
template <typename Matcher>
int FuseAll(Graph& graph, const std::vector<PlanValue>& shapes) {
  int fused = 0;
  for (bool again = true; again;) {
    again = false;
    const Matcher matcher(graph, shapes);
    for (size_t n = 0; n < graph.nodes.size() && !again; ++n) {
      if (std::optional<Fusion> f = matcher.Match(graph.nodes[n])) {
        ApplyFusion(graph, n, std::move(*f));
        ++fused;
        again = true;
      }
    }
  }
  return fused;
}

}  // namespace rankd
