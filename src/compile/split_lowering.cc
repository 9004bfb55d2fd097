// ONNX Split as Slices, so that no backend needs a kernel of its own for it (torch.split and
// torch.chunk export to Split). Output i of Split(x, split?, axis) becomes
//
//   Slice(x, starts = [s_i], ends = [e_i], axes = [axis])
//
// with s_i, e_i the running sums of the constant `split` sizes or, without them, multiples of the
// part size: the axis's length d divided by the number of outputs n (opset 13: d / n, an exact
// division; opset 18 and on: ceil(d / n), the last part shorter). The part size is computed from
// Shape(x), so it is a value a plan folds at its shapes: nothing runs for it per request.
#include <limits>

#include "compile/lowering.h"
#include "compile/passes.h"

namespace rankd {
namespace {

class SplitLowering {
 public:
  explicit SplitLowering(Graph& graph) : g_(graph) {}

  StatusOr<int> Run() {
    return LowerEach(g_, "Split", [this](const Node& node, std::vector<Node>& out) { return Lower(node, out); });
  }

 private:
  int Ints(const std::string& name, const std::vector<int64_t>& v) { return AddInt64s(g_, name, v); }

  // A node of one new INT64 output, appended to `out`.
  int Emit(std::vector<Node>& out, const std::string& op, const std::string& name, std::vector<int> inputs) {
    int value = g_.AddValue({name, DType::kI64, {1}, true});
    out.push_back(Node{op, name, std::move(inputs), {value}, {}});
    return value;
  }

  Status Lower(const Node& split, std::vector<Node>& out) {
    if (!split.HasInput(0) || split.outputs.empty())
      return InvalidArgument(split.Describe() + ": needs an input and outputs");
    const int x = split.inputs[0];
    const int64_t axis = split.GetInt("axis", 0);
    const int64_t n = static_cast<int64_t>(split.outputs.size());
    if (split.Has("num_outputs") && split.GetInt("num_outputs", 0) != n) {
      return InvalidArgument(split.Describe() + ": num_outputs is " + std::to_string(split.GetInt("num_outputs", 0)) +
                             " but the node has " + std::to_string(n) + " outputs");
    }
    if (split.Has("split")) return Unimplemented(split.Describe() + ": `split` as an attribute (opset 12 and older)");
    // Names from the first output's, unique in the graph (node names may be empty or repeat).
    const std::string base = g_.values[static_cast<size_t>(split.outputs[0])].name + ".split";
    const int axes = Ints(base + ".axes", {axis});
    std::vector<int> bounds;  // n + 1 values: the start of each part and the end of the last
    if (split.HasInput(1)) {
      const Tensor* sizes = g_.FindConstant(split.inputs[1]);
      if (!sizes || sizes->dtype() != DType::kI64 || sizes->rank() != 1 || sizes->size() != n) {
        return Unimplemented(split.Describe() + ": the split sizes must be an INT64 constant with one size per output");
      }
      int64_t at = 0;
      bounds.push_back(Ints(base + ".bound0", {0}));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t size = sizes->data<int64_t>()[i];
        if (size < 0 || size > std::numeric_limits<int64_t>::max() - at) {
          return InvalidArgument(split.Describe() + ": split sizes must be non-negative and add up to an INT64");
        }
        at += size;
        bounds.push_back(Ints(base + ".bound" + std::to_string(i + 1), {at}));
      }
    } else {
      int shape = g_.AddValue({base + ".shape", DType::kI64, {-1}, true});
      out.push_back(Node{"Shape", base + ".shape", {x}, {shape}, {}});
      int length = Emit(out, "Gather", base + ".length", {shape, axes});
      if (g_.opset >= 18) length = Emit(out, "Add", base + ".rounded", {length, Ints(base + ".n_less_1", {n - 1})});
      const int part = Emit(out, "Div", base + ".part_size", {length, Ints(base + ".n", {n})});
      for (int64_t i = 0; i <= n; ++i) {
        const std::string name = base + ".bound" + std::to_string(i);
        bounds.push_back(Emit(out, "Mul", name, {part, Ints(name + ".index", {i})}));
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const Node slice{"Slice",
                       base + ".part" + std::to_string(i),
                       {x, bounds[static_cast<size_t>(i)], bounds[static_cast<size_t>(i + 1)], axes},
                       {split.outputs[static_cast<size_t>(i)]},
                       {}};
      out.push_back(slice);
    }
    return Status::Ok();
  }

  Graph& g_;
};

}  // namespace

StatusOr<int> LowerSplits(Graph& graph) { return SplitLowering(graph).Run(); }

}  // namespace rankd
