// TensorFlow's sparse segment sums as tf2onnx writes them (compile/segment_bags.cc): graphs built
// node for node as tf2onnx's SegmentSum handler and TensorFlow's to_sparse_input write them, and
// safe_embedding_lookup_sparse through tf2onnx's SparseReshape, SparseFillEmptyRows and Select
// handlers (no TensorFlow here), in each spelling, recognised as one EmbeddingBag over the padded ids whose
// scores match a direct computation of TensorFlow's combiners; forms over anything else refused
// naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "compile/compiled_model.h"
#include "compile/passes.h"
#include "model/config.h"
#include "model/onnx_import.h"
#include "onnx/onnx_pb.h"
#include "test_util.h"
#include "tf2onnx_graphs.h"

namespace rankd {
namespace {

using testing::GraphBuilder;
using testing::I64;
using testing::MultiOp;

struct Spelling {
  std::string combiner = "sum";      // sum, mean, sqrtn
  bool counted = true;               // num_segments given (the ids' rows), else the largest segment + 1
  bool unique_rows = false;          // the rows gathered through Unique(values), as embedding_lookup_sparse does
  std::string mask = "NotEqual";     // NotEqual (Not(Equal)), Greater, GreaterOrEqual
  bool gather_column = false;        // the segment ids as Gather(where, 0, axis 1), else Slice + Squeeze
  bool segments_from_input = false;  // refused: the segment ids a graph input
  bool rows_from_input = false;      // refused: the rows a graph input
  bool one_hot = false;              // the handler's earlier form: MatMul(OneHot(...), rows)
  // safe_embedding_lookup_sparse: SparseReshape, sparse_retain of the ids >= 0, SparseFillEmptyRows
  // before the segment sum; the filled rows zeroed after it (Where, else tf2onnx's Add/Mul form of
  // Select) and the result reshaped.
  bool safe = false;
  bool zeroed_by_where = true;
  bool zeroed = true;              // refused without: a default_id fills the empty rows
  bool reshaped_to_other = false;  // refused: SparseReshape to [rows * slots, 1]
};

// tf2onnx's SparseReshape, sparse_retain and SparseFillEmptyRows (default id 0) over the sparse
// tensor of padded `ids`, as safe_embedding_lookup_sparse runs them (tf2onnx_graphs.h).
std::pair<int, int> SafeSparse(GraphBuilder& b, const Spelling& s, int ids, int indices, int values, int& empty,
                               int& dense) {
  testing::SafeSteps steps;
  steps.reshaped_to_other = s.reshaped_to_other;
  const testing::SafeSparse safe = testing::Tf2onnxSafeSparse(b, ids, indices, values, steps);
  empty = safe.empty;
  dense = safe.dense;
  return {safe.indices, safe.values};
}

int SafeResult(GraphBuilder& b, const Spelling& s, int out, int empty, int dense) {
  return testing::Tf2onnxSafeResult(b, out, empty, dense, s.zeroed, s.zeroed_by_where);
}

// tf2onnx's SegmentSum handler before 2021: the segment sum as a product with the segment ids one-hot.
int OneHotSum(GraphBuilder& b, const Spelling& s, int rows, int segment, int segments) {
  const int onehot = b.Op("OneHot", {segment, segments, b.Const("onehot_values", testing::MakeF32({2}, {0.0f, 1.0f}))},
                          {{"axis", int64_t{0}}});
  const int flat = b.Op("Reshape", {rows, I64(b, "flat_shape", {0, -1}, {2})});
  int product = b.Op("MatMul", {onehot, flat});
  if (s.combiner != "sum") {
    int scale = b.Op("ReduceSum", {onehot, I64(b, "count_axes", {1}, {1})},
                     {{"keepdims", int64_t{0}}, {"noop_with_empty_axes", int64_t{1}}});
    if (s.combiner == "sqrtn") scale = b.Op("Sqrt", {scale});
    if (s.counted) scale = b.Op("Max", {scale, b.Const("one_float", testing::MakeF32({}, {1.0f}))});
    product = b.Op("Div", {product, b.Op("Unsqueeze", {scale, I64(b, "scale_axes", {1}, {1})})});
  }
  const int trailing = b.Op("Slice", {b.Op("Shape", {rows}), I64(b, "trailing_starts", {1}, {1}),
                                      I64(b, "trailing_ends", {INT64_MAX}, {1}), I64(b, "trailing_axes", {0}, {1})});
  const int shape = b.Op("Concat", {I64(b, "zero_dim", {0}, {1}), trailing}, {{"axis", int64_t{0}}});
  return b.Op("Reshape", {product, shape});
}

// ids [rows, slots] INT64 (-1: empty) -> [rows, width], in tf2onnx's form of `spelling`.
Graph SegmentGraph(const Tensor& table, const Spelling& s) {
  GraphBuilder b;
  const int ids = b.Input("ids", DType::kI64, {-1, -1});
  const int w = b.Const("table", table);
  const int minus_one = I64(b, "minus_one", {-1}, {}), zero = I64(b, "zero", {0}, {}), one = I64(b, "one", {1}, {});
  // TensorFlow's to_sparse_input: the (row, slot) of each id that is not -1, and its value.
  int mask;
  if (s.mask == "Greater") {
    mask = b.Op("Greater", {ids, minus_one});
  } else if (s.mask == "GreaterOrEqual") {
    mask = b.Op("GreaterOrEqual", {ids, zero});
  } else {
    mask = b.Op("Not", {b.Op("Equal", {ids, minus_one})});
  }
  int where = b.Op("Transpose", {b.Op("NonZero", {mask})}, {{"perm", std::vector<int64_t>{1, 0}}});
  int values = b.Op("GatherND", {ids, where});
  int empty = -1, dense = -1;
  if (s.safe) std::tie(where, values) = SafeSparse(b, s, ids, where, values, empty, dense);
  int segment;
  if (s.gather_column) {
    segment = b.Op("Gather", {where, zero}, {{"axis", int64_t{1}}});
  } else {
    const int sliced = b.Op("Slice", {where, I64(b, "starts", {0, 0}, {2}), I64(b, "ends", {INT64_MAX, 1}, {2}),
                                      I64(b, "axes", {0, 1}, {2})});
    segment = b.Op("Squeeze", {sliced, I64(b, "squeeze_axes", {1}, {1})});
  }
  // TensorFlow casts the segment ids to INT32, tf2onnx back to INT64.
  segment = b.Op("Cast", {b.Op("Cast", {segment}, {{"to", int64_t{6}}})}, {{"to", int64_t{7}}});
  if (s.segments_from_input) segment = b.Input("segment_ids", DType::kI64, {-1});
  int rows;
  if (s.rows_from_input) {
    rows = b.Input("rows", DType::kF32, {-1, table.dim(1)});
  } else if (s.unique_rows) {
    const std::vector<int> u = MultiOp(b, "Unique", {values}, 4, {{"sorted", int64_t{1}}});
    rows = b.Op("Gather", {b.Op("Gather", {w, u[0]}), u[2]});
  } else {
    rows = b.Op("Gather", {w, values});
  }
  // tf2onnx's SegmentSum handler.
  int segments;
  if (s.counted) {
    segments = b.Op("Gather", {b.Op("Shape", {ids}), zero});
  } else {
    segments =
        b.Op("Add", {b.Op("ReduceMax", {segment}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}}), one});
  }
  if (s.one_hot) {
    b.Output(OneHotSum(b, s, rows, segment, segments));
    return b.graph();
  }
  const testing::GridSum grid = testing::Tf2onnxGridSum(b, "grid_", rows, segment, segments);
  int scale = -1;
  if (s.combiner != "sum") {
    const int zeros = b.Op("ConstantOfShape", {grid.segments_unsq}, {{"value", testing::MakeI64({1}, {0})}});
    const int counts = b.Op("ScatterElements", {zeros, grid.sorted_unique, grid.counts}, {{"axis", int64_t{0}}});
    scale = b.Op("Cast", {counts}, {{"to", int64_t{1}}});
    if (s.combiner == "sqrtn") scale = b.Op("Sqrt", {scale});
    if (s.counted) scale = b.Op("Max", {scale, b.Const("one_float", testing::MakeF32({}, {1.0f}))});
  }
  int out = grid.sum;
  if (scale >= 0) out = b.Op("Div", {out, b.Op("Unsqueeze", {scale, I64(b, "axes_1", {1}, {1})})});
  if (s.safe) out = SafeResult(b, s, out, empty, dense);
  b.Output(out);
  return b.graph();
}

// TensorFlow's combiners over the ids of each row that are not -1, computed directly.
std::vector<float> Expected(const Tensor& table, const Tensor& ids, const std::string& combiner) {
  const int64_t rows = ids.dim(0), slots = ids.dim(1), width = table.dim(1);
  std::vector<float> out(static_cast<size_t>(rows * width), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t count = 0;
    for (int64_t k = 0; k < slots; ++k) {
      const int64_t id = ids.data<int64_t>()[r * slots + k];
      if (id < 0) continue;
      ++count;
      for (int64_t c = 0; c < width; ++c)
        out[static_cast<size_t>(r * width + c)] += table.data<float>()[id * width + c];
    }
    if (count == 0 || combiner == "sum") continue;
    const float scale = combiner == "mean" ? static_cast<float>(count) : std::sqrt(static_cast<float>(count));
    for (int64_t c = 0; c < width; ++c) out[static_cast<size_t>(r * width + c)] /= scale;
  }
  return out;
}

// Checks that `g` scores `ids` as TensorFlow's `combiner` over `table` does.
void ExpectScoresAsTensorFlow(const Graph& g, const Tensor& table, const Tensor& ids, const std::string& combiner,
                              const std::string& what) {
  auto got = testing::RunGraph(g, {ids});
  ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
  const std::vector<float> want = Expected(table, ids, combiner);
  ASSERT_EQ((*got)[0].size(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR((*got)[0].data<float>()[i], want[i], 1e-5) << what << " at " << i;
}

TEST(SegmentBags, EverySpellingOfTf2onnxSegmentSumsIsOneBagScoringAsTensorFlow) {
  std::mt19937_64 rng(11);
  const Tensor table = testing::RandomTable(DType::kF32, 50, 6, rng);
  // Rows of 0 to 5 ids of 5 slots, -1 where empty (anywhere in the row: to_sparse_input keeps the
  // others); with the segments not counted every row has one (embedding_lookup_sparse's rule).
  auto make_ids = [&](bool every_row) {
    std::vector<int64_t> v;
    for (int r = 0; r < 9; ++r) {
      for (int k = 0; k < 5; ++k) v.push_back(rng() % 3 == 0 ? -1 : static_cast<int64_t>(rng() % 50));
      if (every_row || r == 3) v[static_cast<size_t>(r * 5 + 2)] = every_row ? 7 : -1;
      if (!every_row && r == 3) std::fill(v.end() - 5, v.end(), -1);  // an empty row
    }
    return testing::MakeI64({9, 5}, v);
  };
  int cases = 0;
  for (const char* combiner : {"sum", "mean", "sqrtn"}) {
    for (bool counted : {true, false}) {
      for (bool unique_rows : {false, true}) {
        for (const char* mask : {"NotEqual", "Greater", "GreaterOrEqual"}) {
          for (int form = 0; form < 4; ++form) {  // the column by Slice or Gather; the grid or OneHot form
            const bool gather_column = form % 2 == 1, one_hot = form >= 2;
            Spelling s{combiner, counted, unique_rows, mask, gather_column};
            s.one_hot = one_hot;
            const std::string what = std::string(combiner) + (counted ? " counted" : " largest+1") +
                                     (unique_rows ? " unique" : "") + " " + mask +
                                     (gather_column ? " gather" : " slice") + (one_hot ? " one-hot" : " grid");
            Graph g = SegmentGraph(table, s);
            auto fused = FuseSegmentBags(g);
            ASSERT_TRUE(fused.ok()) << what << ": " << fused.status().ToString();
            EXPECT_EQ(*fused, 1) << what;
            EXPECT_EQ(testing::CountOps(g, "EmbeddingBag"), 1) << what;
            EXPECT_EQ(testing::CountOps(g, "TopK") + testing::CountOps(g, "NonZero") +
                          testing::CountOps(g, "ScatterND") + testing::CountOps(g, "OneHot"),
                      0)
                << what;
            ExpectScoresAsTensorFlow(g, table, make_ids(!counted), combiner, what);
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 144);
}

// ids [rows, 5] with -1 padding, other negative ids (which sparse_retain drops) and empty rows,
// one of them the last.
Tensor SafeIds(std::mt19937_64& rng) {
  std::vector<int64_t> v;
  for (int r = 0; r < 9; ++r) {
    for (int k = 0; k < 5; ++k) {
      const uint64_t pick = rng() % 4;
      v.push_back(pick == 0 ? -1 : pick == 1 ? -3 : static_cast<int64_t>(rng() % 50));
    }
  }
  std::fill(v.begin() + 15, v.begin() + 20, -1);  // row 3
  std::fill(v.end() - 5, v.end(), -3);            // row 8: only ids the retain drops
  return testing::MakeI64({9, 5}, v);
}

TEST(SegmentBags, SafeEmbeddingLookupSparseIsOneBagScoringAsTensorFlow) {
  std::mt19937_64 rng(15);
  const Tensor table = testing::RandomTable(DType::kF32, 50, 6, rng);
  int cases = 0;
  for (const char* combiner : {"sum", "mean", "sqrtn"}) {
    for (bool by_where : {true, false}) {
      for (bool unique_rows : {true, false}) {
        for (const char* mask : {"NotEqual", "Greater", "GreaterOrEqual"}) {
          Spelling s{combiner, /*counted=*/false, unique_rows, mask};
          s.safe = true;
          s.zeroed_by_where = by_where;
          const std::string what =
              std::string(combiner) + (by_where ? " where" : " add/mul") + (unique_rows ? " unique" : "") + " " + mask;
          Graph g = SegmentGraph(table, s);
          auto fused = FuseSegmentBags(g);
          ASSERT_TRUE(fused.ok()) << what << ": " << fused.status().ToString();
          EXPECT_EQ(*fused, 1) << what;
          EXPECT_EQ(g.nodes.size(), 1u) << what << ": the bag alone, what fed it removed";
          EXPECT_EQ(testing::CountOps(g, "EmbeddingBag"), 1) << what;
          ExpectScoresAsTensorFlow(g, table, SafeIds(rng), combiner, what);
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 36);
}

// A default_id (empty rows scored as that id's row, not zeroed) and a SparseReshape that moves
// the ids to other rows are refused, naming the segment sum.
TEST(SegmentBags, SafeLookupsRankdWouldScoreOtherwiseAreRefused) {
  std::mt19937_64 rng(16);
  const Tensor table = testing::RandomTable(DType::kF32, 20, 4, rng);
  Spelling with_default;
  with_default.safe = true;
  with_default.counted = false;
  with_default.zeroed = false;
  Spelling reshaped = with_default;
  reshaped.zeroed = true;
  reshaped.reshaped_to_other = true;
  for (const Spelling& s : {with_default, reshaped}) {
    Graph g = SegmentGraph(table, s);
    auto fused = FuseSegmentBags(g);
    ASSERT_FALSE(fused.ok());
    EXPECT_EQ(fused.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(fused.status().message().find("ReduceSum"), std::string::npos) << fused.status().message();
    EXPECT_NE(fused.status().message().find(s.zeroed ? "not a sparse tensor made from padded ids" : "default_id"),
              std::string::npos)
        << fused.status().message();
  }
}

// Through the load's passes, with the ids served as a ragged input (rows of ids, the padded form
// the graph takes built from them): the segment sum is the first thing a load recognises, before
// anything reads the graph's ops.
TEST(SegmentBags, ALoadRecognisesThemBeforeCheckingTheGraph) {
  std::mt19937_64 rng(13);
  const Tensor table = testing::RandomTable(DType::kF32, 30, 4, rng);
  Spelling s;
  s.combiner = "mean";
  s.unique_rows = true;
  Graph g = SegmentGraph(table, s);
  g.values[static_cast<size_t>(g.outputs[0])].name = "pooled";
  auto config = ParseModelConfig(
      "name: tf_segments\ninputs:\n  - name: ids\n    datatype: INT64\n    ragged: true\n    max_length: 5\n"
      "outputs:\n  - name: pooled\n",
      true);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto compiled = CompiledModel::Compile(std::move(g), std::move(*config));
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_EQ((*compiled)->report().fused_segment_bags, 1);
  EXPECT_EQ(testing::CountOps((*compiled)->graph(), "TopK"), 0);
}

TEST(SegmentBags, AnOnnxFileOfEachFormImportsAndLoadsAsABag) {
  std::mt19937_64 rng(14);
  const Tensor table = testing::RandomTable(DType::kF32, 30, 4, rng);
  for (const char* form : {"grid", "one-hot", "safe"}) {
    Spelling s;
    s.combiner = "sqrtn";
    s.one_hot = form == std::string("one-hot");
    s.safe = form == std::string("safe");
    s.counted = !s.safe;
    Graph built = SegmentGraph(table, s);
    built.values[static_cast<size_t>(built.outputs[0])].name = "pooled";
    const std::string bytes = testing::AsOnnx(built);
    auto imported = ImportOnnxBytes(bytes.data(), bytes.size(), {});
    ASSERT_TRUE(imported.ok()) << imported.status().ToString();
    auto config = ParseModelConfig(
        "name: tf_segments\ninputs:\n  - name: ids\n    datatype: INT64\n    dims: [5]\n"
        "outputs:\n  - name: pooled\n",
        true);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    auto compiled = CompiledModel::Compile(std::move(*imported), std::move(*config));
    ASSERT_TRUE(compiled.ok()) << form << ": " << compiled.status().ToString();
    EXPECT_EQ((*compiled)->report().fused_segment_bags, 1);
    const Tensor ids = testing::MakeI64({3, 5}, {3, -1, 7, 7, -1, -1, -1, -1, -1, 29, -1, -1, -1, -1, -1});
    ExpectScoresAsTensorFlow((*compiled)->graph(), table, ids, "sqrtn", form);
  }
}

// The same handler's form over segment ids or rows that are not a sparse tensor made from padded
// ids: refused at load naming the node, never silently run some other way.
TEST(SegmentBags, SegmentSumsOverAnythingElseAreRefusedNamingTheNode) {
  std::mt19937_64 rng(12);
  const Tensor table = testing::RandomTable(DType::kF32, 20, 4, rng);
  Spelling from_input;
  from_input.segments_from_input = true;
  Spelling rows_input;
  rows_input.rows_from_input = true;
  Spelling one_hot_input = from_input;
  one_hot_input.one_hot = true;
  for (const Spelling& s : {from_input, rows_input, one_hot_input}) {
    Graph g = SegmentGraph(table, s);
    auto fused = FuseSegmentBags(g);
    ASSERT_FALSE(fused.ok());
    EXPECT_EQ(fused.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(fused.status().message().find(s.one_hot ? "Reshape" : "ReduceSum"), std::string::npos)
        << fused.status().message();
    EXPECT_NE(fused.status().message().find("sparse segments"), std::string::npos) << fused.status().message();
  }
  // A graph without the form is left as it is.
  Graph plain;
  auto none = FuseSegmentBags(plain);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
}

}  // namespace
}  // namespace rankd
