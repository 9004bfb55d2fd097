// TensorFlow's weighted sparse lookups as tf2onnx writes them, built node for node for the tests
// of compile/segment_bags.cc and their ragged serving (no TensorFlow here): each spelling's graph,
// and TensorFlow's weighted combiners computed directly.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "model/graph.h"
#include "test_util.h"
#include "tf2onnx_graphs.h"

namespace rankd::testing {

struct Spelling {
  std::string combiner = "sum";     // sum, mean, sqrtn
  bool own_indices = false;         // the weights' sparse tensor by their own to_sparse_input (w != 0)
  bool unsqueezed = false;          // the weights' column by Unsqueeze, else Reshape(w, Concat(Shape(w), [1]))
  bool div_no_nan = true;           // DivNoNan as tf2onnx writes it, else a plain Div (TensorFlow 1)
  bool squares_by_mul = false;      // sqrt-n's Pow(w, 2) as Mul(w, w)
  bool unique_rows = true;          // the rows gathered through Unique(values), as embedding_lookup_sparse does
  bool counted = false;             // the segments counted as the ids' rows, else the largest segment + 1
  bool weights_from_input = false;  // refused: the weights' values a graph input of their own
  // safe_embedding_lookup_sparse (an embedding_column over a weighted_categorical_column): the
  // ids and weights retained and filled together, the empty rows zeroed after (by Where, else by
  // tf2onnx's Add/Mul form of Select) and the result reshaped; TensorFlow 2 drops the weights <= 0
  // for a mean or sqrt-n in a second retain, TensorFlow 1 in the first for every combiner.
  bool safe = false;
  bool tf1 = false;
  bool zeroed_by_where = true;
  bool Pruned() const { return safe && (tf1 || combiner != "sum"); }
};

// ids [rows, slots] INT64 (-1: empty) and weights [rows, slots] FP32 -> [rows, width].
inline Graph WeightedGraph(const Tensor& table, const Spelling& s) {
  GraphBuilder b;
  const int ids = b.Input("ids", DType::kI64, {-1, -1});
  const int weights = b.Input("weights", DType::kF32, {-1, -1});
  const int w = b.Const("table", table);
  const int minus_one = I64(b, "minus_one", {-1}, {}), zero = I64(b, "zero", {0}, {}), one = I64(b, "one", {1}, {});
  const int zero_float = b.Const("zero_float", testing::MakeF32({}, {0.0f}));
  // to_sparse_input: the (row, slot) of each id that is not -1, and its value.
  const int where = b.Op("Transpose", {b.Op("NonZero", {b.Op("Not", {b.Op("Equal", {ids, minus_one})})})},
                         {{"perm", std::vector<int64_t>{1, 0}}});
  const int values = b.Op("GatherND", {ids, where});
  int weight_values;
  if (s.weights_from_input) {
    weight_values = b.Input("weight_values", DType::kF32, {-1});
  } else {
    const int at = s.own_indices
                       ? b.Op("Transpose", {b.Op("NonZero", {b.Op("Not", {b.Op("Equal", {weights, zero_float})})})},
                              {{"perm", std::vector<int64_t>{1, 0}}})
                       : where;
    weight_values = b.Op("GatherND", {weights, at});
  }
  int sparse_indices = where, sparse_values = values;
  testing::SafeSparse safe{};
  if (s.safe) {
    testing::SafeSteps steps;
    steps.weights = weight_values;
    steps.prune = !s.tf1 && s.combiner != "sum";
    steps.prune_in_one = s.tf1;
    safe = testing::Tf2onnxSafeSparse(b, ids, where, values, steps);
    sparse_indices = safe.indices;
    sparse_values = safe.values;
    weight_values = safe.weights;
  }
  const int sliced = b.Op("Slice", {sparse_indices, I64(b, "starts", {0, 0}, {2}), I64(b, "ends", {INT64_MAX, 1}, {2}),
                                    I64(b, "axes", {0, 1}, {2})});
  int segment = b.Op("Squeeze", {sliced, I64(b, "squeeze_axes", {1}, {1})});
  segment = b.Op("Cast", {b.Op("Cast", {segment}, {{"to", int64_t{6}}})}, {{"to", int64_t{7}}});
  int rows;
  if (s.unique_rows) {
    const std::vector<int> u = testing::MultiOp(b, "Unique", {sparse_values}, 4, {{"sorted", int64_t{1}}});
    rows = b.Op("Gather", {b.Op("Gather", {w, u[0]}), u[2]});
  } else {
    rows = b.Op("Gather", {w, sparse_values});
  }
  // embeddings *= Reshape(weights, Concat(Shape(weights), ones)).
  const int column =
      s.unsqueezed
          ? b.Op("Unsqueeze", {weight_values, I64(b, "column_axes", {1}, {1})})
          : b.Op("Reshape", {weight_values, b.Op("Concat", {b.Op("Shape", {weight_values}), I64(b, "ones", {1}, {1})},
                                                 {{"axis", int64_t{0}}})});
  const int weighted = b.Op("Mul", {rows, column});
  // Each SegmentSum handler counts its segments on its own.
  auto segments = [&]() {
    if (s.counted) return b.Op("Gather", {b.Op("Shape", {ids}), zero});
    return b.Op("Add",
                {b.Op("ReduceMax", {segment}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}}), one});
  };
  int out = testing::Tf2onnxGridSum(b, "rows_", weighted, segment, segments()).sum;
  if (s.combiner != "sum") {
    int summed = column;
    if (s.combiner == "sqrtn") {
      summed = s.squares_by_mul ? b.Op("Mul", {column, column})
                                : b.Op("Pow", {column, b.Const("two", testing::MakeF32({}, {2.0f}))});
    }
    int divisor = testing::Tf2onnxGridSum(b, "weights_", summed, segment, segments()).sum;
    if (s.combiner == "sqrtn") divisor = b.Op("Sqrt", {divisor});
    out = b.Op("Div", {out, divisor});
    if (s.div_no_nan) out = b.Op("Where", {b.Op("Equal", {divisor, zero_float}), zero_float, out});
  }
  if (s.safe) out = testing::Tf2onnxSafeResult(b, out, safe.empty, safe.dense, true, s.zeroed_by_where);
  b.Output(out);
  return b.graph();
}

// TensorFlow's weighted combiners over the ids of each row that are not -1, in double.
// With `pruned`, the weights <= 0 are dropped with their ids.
inline std::vector<float> Expected(const Tensor& table, const Tensor& ids, const Tensor& weights,
                                   const std::string& combiner, bool pruned = false) {
  const int64_t rows = ids.dim(0), slots = ids.dim(1), width = table.dim(1);
  std::vector<float> out(static_cast<size_t>(rows * width), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> sum(static_cast<size_t>(width), 0.0);
    double divisor = 0.0;
    for (int64_t k = 0; k < slots; ++k) {
      const int64_t id = ids.data<int64_t>()[r * slots + k];
      const double wk = weights.data<float>()[r * slots + k];
      if (id < 0 || (pruned && wk <= 0)) continue;
      divisor += combiner == "sqrtn" ? wk * wk : wk;
      for (int64_t c = 0; c < width; ++c) sum[static_cast<size_t>(c)] += wk * table.data<float>()[id * width + c];
    }
    if (combiner == "sqrtn") divisor = std::sqrt(divisor);
    if (combiner == "sum") divisor = 1.0;
    for (int64_t c = 0; c < width; ++c) {
      out[static_cast<size_t>(r * width + c)] =
          divisor == 0.0 ? 0.0f : static_cast<float>(sum[static_cast<size_t>(c)] / divisor);
    }
  }
  return out;
}

}  // namespace rankd::testing
