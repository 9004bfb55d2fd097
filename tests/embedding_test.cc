// EmbeddingBag and ragged inputs against a plain reference on random inputs, and the pass that
// recognises PyTorch's masked-gather bag in its usual spellings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "compile/passes.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;
using testing::RunGraph;

// Reference: for each bag, the sum of table rows of its non-negative ids, or their mean, or their
// sum over the square root of their count (in double), or their element-wise max (zeros for none).
std::vector<float> ReferenceBags(const std::vector<float>& table, int64_t dim, const std::vector<int64_t>& ids,
                                 const std::vector<int64_t>& offsets, const std::string& mode) {
  size_t bags = offsets.size() - 1;
  std::vector<float> out(bags * static_cast<size_t>(dim), 0.0f);
  for (size_t b = 0; b < bags; ++b) {
    int count = 0;
    for (int64_t j = offsets[b]; j < offsets[b + 1]; ++j) {
      if (ids[static_cast<size_t>(j)] < 0) continue;
      ++count;
      for (int64_t d = 0; d < dim; ++d) {
        float& x = out[b * static_cast<size_t>(dim) + static_cast<size_t>(d)];
        const float v = table[static_cast<size_t>(ids[static_cast<size_t>(j)] * dim + d)];
        x = mode != "max" ? x + v : count == 1 ? v : std::max(x, v);
      }
    }
    const double divisor = count == 0 ? 1.0 : mode == "mean" ? count : mode == "sqrtn" ? std::sqrt(count) : 1.0;
    for (int64_t d = 0; d < dim; ++d) {
      float& x = out[b * static_cast<size_t>(dim) + static_cast<size_t>(d)];
      x = static_cast<float>(x / divisor);
    }
  }
  return out;
}

struct BagCase {
  const char* name;
  int64_t rows, dim, bags, max_len;
  double empty_fraction, minus_one_fraction;
  const char* mode;
  DType table_dtype;
};

class EmbeddingBagTest : public ::testing::TestWithParam<BagCase> {};

TEST_P(EmbeddingBagTest, RaggedAndPaddedMatchReference) {
  const BagCase c = GetParam();
  std::mt19937_64 rng(c.rows * 31 + c.bags);
  std::uniform_real_distribution<float> val(-1, 1);
  std::uniform_real_distribution<double> coin(0, 1);
  std::vector<float> table(static_cast<size_t>(c.rows * c.dim));
  for (float& v : table) v = val(rng);
  // Tables held in FP16/BF16 are compared with the reference on the rounded values.
  Tensor t = Tensor::Zeros(c.table_dtype, {c.rows, c.dim});
  for (size_t i = 0; i < table.size(); ++i) {
    if (c.table_dtype == DType::kF16) {
      t.data<uint16_t>()[i] = FloatToHalf(table[i]);
      table[i] = HalfToFloat(t.data<uint16_t>()[i]);
    } else if (c.table_dtype == DType::kBF16) {
      t.data<uint16_t>()[i] = FloatToBF16(table[i]);
      table[i] = BF16ToFloat(t.data<uint16_t>()[i]);
    } else
      t.data<float>()[i] = table[i];
  }
  std::vector<int64_t> ids, offsets{0}, padded(static_cast<size_t>(c.bags * c.max_len), -1);
  for (int64_t b = 0; b < c.bags; ++b) {
    int64_t len = coin(rng) < c.empty_fraction ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(c.max_len + 1));
    for (int64_t j = 0; j < len; ++j) {
      int64_t id = coin(rng) < c.minus_one_fraction ? -1 : static_cast<int64_t>(rng() % static_cast<uint64_t>(c.rows));
      ids.push_back(id);
      padded[static_cast<size_t>(b * c.max_len + j)] = id;
    }
    offsets.push_back(static_cast<int64_t>(ids.size()));
  }
  std::vector<float> want = ReferenceBags(table, c.dim, ids, offsets, c.mode);
  Tensor ref = testing::MakeF32({c.bags, c.dim}, want);
  std::string mode = c.mode;

  GraphBuilder ragged;
  int table_id = ragged.Const("table", t);
  int v = ragged.Input("v", DType::kI64, {-1});
  int o = ragged.Input("o", DType::kI64, {-1});
  ragged.Output(ragged.Op("EmbeddingBag", {table_id, v, o}, {{"mode", mode}}));
  auto got = RunGraph(ragged.graph(), {testing::MakeI64({static_cast<int64_t>(ids.size())}, ids),
                                       testing::MakeI64({c.bags + 1}, offsets)});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_LE(testing::RelativeError((*got)[0], ref), 1e-6);
  // Ids past the last offset belong to no bag (a bucket's padding): even one out of range there
  // changes nothing, on the CPU as on CUDA.
  std::vector<int64_t> tailed = ids;
  tailed.insert(tailed.end(), {c.rows + 7, -1, 0});
  for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
    if (!backend) continue;
    auto with_tail = RunGraph(
        ragged.graph(),
        {testing::MakeI64({static_cast<int64_t>(tailed.size())}, tailed), testing::MakeI64({c.bags + 1}, offsets)}, {},
        *backend);
    ASSERT_TRUE(with_tail.ok()) << backend->name() << ": " << with_tail.status().ToString();
    EXPECT_LE(testing::RelativeError((*with_tail)[0], ref), 1e-5) << backend->name();
  }

  GraphBuilder dense;
  int table2 = dense.Const("table", t);
  int p = dense.Input("p", DType::kI64, {-1, c.max_len});
  dense.Output(dense.Op("EmbeddingBag", {table2, p}, {{"mode", mode}}));
  auto got2 = RunGraph(dense.graph(), {testing::MakeI64({c.bags, c.max_len}, padded)});
  ASSERT_TRUE(got2.ok()) << got2.status().ToString();
  EXPECT_LE(testing::RelativeError((*got2)[0], ref), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EmbeddingBagTest,
    ::testing::Values(BagCase{"OneRow", 100, 8, 1, 5, 0.0, 0.0, "sum", DType::kF32},  // one row
                      BagCase{"EmptyBagsAndMinusOne", 1000, 16, 64, 12, 0.2, 0.1, "sum",
                              DType::kF32},                                                // empty bags and -1 slots
                      BagCase{"Mean", 1000, 16, 64, 12, 0.2, 0.1, "mean", DType::kF32},    // mean
                      BagCase{"AllMinusOne", 50, 3, 33, 7, 0.0, 1.0, "sum", DType::kF32},  // all -1: zeros
                      BagCase{"LengthZero", 50, 5, 17, 0, 0.0, 0.0, "sum", DType::kF32},   // length-0 everywhere
                      BagCase{"Fp16Table", 5000, 64, 300, 40, 0.05, 0.05, "sum", DType::kF16},
                      BagCase{"Bf16TableMean", 5000, 32, 300, 40, 0.05, 0.05, "mean", DType::kBF16},
                      BagCase{"SqrtN", 1000, 16, 64, 12, 0.2, 0.1, "sqrtn", DType::kF32},
                      BagCase{"Fp16TableSqrtN", 5000, 64, 300, 40, 0.05, 0.05, "sqrtn", DType::kF16},
                      BagCase{"Max", 1000, 16, 64, 12, 0.2, 0.1, "max", DType::kF32},
                      BagCase{"Bf16TableMax", 5000, 32, 300, 40, 0.05, 0.05, "max", DType::kBF16}),
    [](const ::testing::TestParamInfo<BagCase>& info) { return std::string(info.param.name); });

TEST(EmbeddingBag, IdOutOfRangeIsAnError) {
  GraphBuilder g;
  int table = g.Const("table", testing::MakeF32({2, 2}, {1, 2, 3, 4}));
  int p = g.Input("p", DType::kI64, {-1, 2});
  g.Output(g.Op("EmbeddingBag", {table, p}));
  auto r = RunGraph(g.graph(), {testing::MakeI64({1, 2}, {1, 2})});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("id 2 is out of range"), std::string::npos) << r.status().message();
}

// Weighted bags against a reference in double: each row times its id's weight, summed; the mean
// divided by the weights' sum, sqrtn by the square root of their squares' sum (zeros where that
// is 0), -1 slots and their weights skipped, on every backend.
TEST(WeightedEmbeddingBag, MatchesReferenceOnEveryBackend) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> val(-1, 1);
  const int64_t rows = 500, dim = 12, bags = 40;
  for (DType table_dtype : {DType::kF32, DType::kBF16}) {
    Tensor t = Tensor::Zeros(table_dtype, {rows, dim});
    std::vector<float> table(static_cast<size_t>(rows * dim));
    for (size_t i = 0; i < table.size(); ++i) {
      table[i] = val(rng);
      if (table_dtype == DType::kBF16) {
        t.data<uint16_t>()[i] = FloatToBF16(table[i]);
        table[i] = BF16ToFloat(t.data<uint16_t>()[i]);
      } else {
        t.data<float>()[i] = table[i];
      }
    }
    std::vector<int64_t> ids, offsets{0};
    std::vector<float> weights;
    for (int64_t b = 0; b < bags; ++b) {
      const int64_t len = b % 9 == 0 ? 0 : static_cast<int64_t>(rng() % 10);
      for (int64_t j = 0; j < len; ++j) {
        ids.push_back(rng() % 8 == 0 ? -1 : static_cast<int64_t>(rng() % rows));
        weights.push_back(b % 7 == 3 ? 0.0f : 2 * val(rng));  // bag 3, 10, ...: all weights 0
      }
      offsets.push_back(static_cast<int64_t>(ids.size()));
    }
    for (const std::string mode : {"sum", "mean", "sqrtn"}) {
      std::vector<float> want(static_cast<size_t>(bags * dim));
      for (int64_t b = 0; b < bags; ++b) {
        std::vector<double> acc(static_cast<size_t>(dim));
        double sum = 0, squares = 0;
        for (int64_t j = offsets[static_cast<size_t>(b)]; j < offsets[static_cast<size_t>(b) + 1]; ++j) {
          const int64_t id = ids[static_cast<size_t>(j)];
          if (id < 0) continue;
          const double w = weights[static_cast<size_t>(j)];
          sum += w, squares += w * w;
          for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] += w * table[static_cast<size_t>(id * dim + d)];
        }
        const double divisor = mode == "mean" ? sum : mode == "sqrtn" ? std::sqrt(squares) : 1.0;
        for (int64_t d = 0; d < dim; ++d) {
          want[static_cast<size_t>(b * dim + d)] =
              divisor == 0 ? 0.0f : static_cast<float>(acc[static_cast<size_t>(d)] / divisor);
        }
      }
      GraphBuilder g;
      const int table_id = g.Const("table", t);
      const int v = g.Input("v", DType::kI64, {-1}), o = g.Input("o", DType::kI64, {-1});
      const int w = g.Input("w", DType::kF32, {-1});
      g.Output(g.Op("EmbeddingBag", {table_id, v, o, w}, {{"mode", mode}}));
      const std::vector<Tensor> inputs{testing::MakeI64({static_cast<int64_t>(ids.size())}, ids),
                                       testing::MakeI64({bags + 1}, offsets),
                                       testing::MakeF32({static_cast<int64_t>(weights.size())}, weights)};
      for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
        if (!backend) continue;
        auto got = RunGraph(g.graph(), inputs, {}, *backend);
        ASSERT_TRUE(got.ok()) << backend->name() << " " << mode << ": " << got.status().ToString();
        EXPECT_LE(testing::RelativeError((*got)[0], testing::MakeF32({bags, dim}, want)), 1e-5)
            << backend->name() << " " << mode << " " << DTypeName(table_dtype);
      }
      // Fewer weights than the bags read: the request fails, naming the bag.
      std::vector<float> short_weights(weights.begin(), weights.end() - 1);
      auto cut = RunGraph(g.graph(), {inputs[0], inputs[1],
                                      testing::MakeF32({static_cast<int64_t>(short_weights.size())}, short_weights)});
      EXPECT_EQ(cut.status().code(), StatusCode::kInvalidArgument) << cut.status().ToString();
      EXPECT_NE(cut.status().message().find("weights for"), std::string::npos) << cut.status().message();
    }
  }
}

// A max bag takes no weights, and weights are FP32 [total]: refused when the graph is built.
TEST(WeightedEmbeddingBag, MaxAndWrongWeightsAreRefused) {
  for (const auto& [mode, weights_dtype] :
       {std::pair<std::string, DType>{"max", DType::kF32}, std::pair<std::string, DType>{"sum", DType::kI64}}) {
    GraphBuilder g;
    const int table = g.Const("table", testing::MakeF32({2, 2}, {1, 2, 3, 4}));
    const int v = g.Input("v", DType::kI64, {-1}), o = g.Input("o", DType::kI64, {-1});
    const int w = g.Input("w", weights_dtype, {-1});
    g.Output(g.Op("EmbeddingBag", {table, v, o, w}, {{"mode", mode}}));
    Tensor weights = weights_dtype == DType::kF32 ? testing::MakeF32({2}, {1, 1}) : testing::MakeI64({2}, {1, 1});
    auto r = RunGraph(g.graph(), {testing::MakeI64({2}, {0, 1}), testing::MakeI64({2}, {0, 2}), weights});
    EXPECT_FALSE(r.ok()) << mode;
    EXPECT_NE(r.status().message().find(mode == "max" ? "a max bag takes no weights" : "weights must be FP32"),
              std::string::npos)
        << r.status().message();
  }
}

// The PyTorch pattern, in one of its spellings: clamp by `clamp_op`, mask by `mask_op`.
Graph MaskedBagGraph(const std::string& clamp_op, const std::string& mask_op, bool mask_left, const Tensor& table) {
  GraphBuilder b;
  int ids = b.Input("ids", DType::kI64, {-1, -1});
  int zero = b.Const("zero", testing::MakeI64({}, {0}));
  int minus_one = b.Const("minus_one", testing::MakeI64({}, {-1}));
  int w = b.Const("w", table);
  int clamped;
  if (clamp_op == "Clip")
    clamped = b.Op("Clip", {ids, zero});
  else if (clamp_op == "Max")
    clamped = b.Op("Max", {ids, zero});
  else
    clamped = b.Op("Where", {b.Op("GreaterOrEqual", {ids, zero}), ids, zero});
  int rows = b.Op("Gather", {w, clamped});
  if (table.dtype() != DType::kF32) rows = b.Op("Cast", {rows}, {{"to", int64_t{1}}});  // a 16-bit table
  int mask = mask_op == "GreaterOrEqual" ? b.Op("GreaterOrEqual", {ids, zero})
             : mask_op == "Greater"      ? b.Op("Greater", {ids, minus_one})
                                         : b.Op("Not", {b.Op("Equal", {ids, minus_one})});
  int axes_last = b.Const("axes_last", testing::MakeI64({1}, {-1}));
  int m = b.Op("Cast", {b.Op("Unsqueeze", {mask, axes_last})}, {{"to", int64_t{1}}});
  int prod = mask_left ? b.Op("Mul", {m, rows}) : b.Op("Mul", {rows, m});
  int axes1 = b.Const("axes1", testing::MakeI64({1}, {1}));
  b.Output(b.Op("ReduceSum", {prod, axes1}, {{"keepdims", int64_t{0}}}));
  return b.graph();
}

TEST(EmbeddingBagFusion, RecognisesEverySpellingAndKeepsResults) {
  Tensor table = testing::MakeF32({4, 2}, {1, 10, 2, 20, 3, 30, 4, 40});
  Tensor ids = testing::MakeI64({3, 3}, {0, 2, -1, -1, -1, -1, 3, 3, 1});
  for (const char* clamp : {"Clip", "Max", "Where"}) {
    for (const char* mask : {"GreaterOrEqual", "Greater", "NotEqual"}) {
      for (bool left : {false, true}) {
        Graph g = MaskedBagGraph(clamp, mask, left, table);
        auto before = RunGraph(g, {ids});
        ASSERT_TRUE(before.ok()) << before.status().ToString();
        EXPECT_EQ(FuseMaskedEmbeddingBags(g), 1) << clamp << " " << mask << " " << left;
        EXPECT_EQ(g.OpCounts()["EmbeddingBag"], 1);
        EXPECT_EQ(g.nodes.size(), 1u);
        auto after = RunGraph(g, {ids});
        ASSERT_TRUE(after.ok()) << after.status().ToString();
        EXPECT_EQ(testing::RelativeError((*after)[0], (*before)[0]), 0.0);
        EXPECT_EQ((*after)[0].data<float>()[0], 4.0f);    // rows 0 + 2
        EXPECT_EQ((*after)[0].data<float>()[2], 0.0f);    // all -1
        EXPECT_EQ((*after)[0].data<float>()[5], 100.0f);  // 40 + 40 + 20
      }
    }
  }
}

// TensorFlow's mean and sqrtn combiners as PyTorch code writes them: the masked bag's sum divided
// by the count of its ids >= 0 clamped to at least 1 (Clip or Max), or by that count's square root;
// the count summed from the mask [bags, n] (keepdims) or from the unsqueezed one (without).
Graph CombinedBagGraph(const Tensor& table, bool sqrtn, bool clip, bool from_unsqueezed, bool other_ids = false) {
  GraphBuilder b;
  int ids = b.Input("ids", DType::kI64, {-1, -1});
  int zero = b.Const("zero", testing::MakeI64({}, {0}));
  int one = b.Const("one", testing::MakeF32({}, {1}));
  int rows = b.Op("Gather", {b.Const("w", table), b.Op("Clip", {ids, zero})});
  int mask = b.Op("GreaterOrEqual", {ids, zero});
  int m3 = b.Op("Cast", {b.Op("Unsqueeze", {mask, b.Const("axes_last", testing::MakeI64({1}, {-1}))})},
                {{"to", int64_t{1}}});
  int axes1 = b.Const("axes1", testing::MakeI64({1}, {1}));
  int sum = b.Op("ReduceSum", {b.Op("Mul", {rows, m3}), axes1}, {{"keepdims", int64_t{0}}});
  int counted = other_ids ? b.Op("GreaterOrEqual", {b.Input("other", DType::kI64, {-1, -1}), zero}) : mask;
  int count = from_unsqueezed ? b.Op("ReduceSum", {m3, axes1}, {{"keepdims", int64_t{0}}})
                              : b.Op("ReduceSum", {b.Op("Cast", {counted}, {{"to", int64_t{1}}}), axes1},
                                     {{"keepdims", int64_t{1}}});
  int at_least_one = b.Op(clip ? "Clip" : "Max", {count, one});
  b.Output(b.Op("Div", {sum, sqrtn ? b.Op("Sqrt", {at_least_one}) : at_least_one}));
  return b.graph();
}

TEST(EmbeddingBagFusion, MeanAndSqrtNCombinersFuseIntoTheBag) {
  Tensor table = testing::MakeF32({4, 2}, {1, 10, 2, 20, 3, 30, 4, 40});
  Tensor ids = testing::MakeI64({3, 3}, {0, 2, -1, -1, -1, -1, 3, 3, 1});
  for (bool sqrtn : {false, true}) {
    for (bool clip : {false, true}) {
      for (bool from_unsqueezed : {false, true}) {
        const std::string what = std::string(sqrtn ? "sqrtn" : "mean") + (clip ? " Clip" : " Max") +
                                 (from_unsqueezed ? " unsqueezed count" : " count");
        Graph g = CombinedBagGraph(table, sqrtn, clip, from_unsqueezed);
        auto before = RunGraph(g, {ids});
        ASSERT_TRUE(before.ok()) << before.status().ToString();
        EXPECT_EQ(FuseMaskedEmbeddingBags(g), 2) << what;
        ASSERT_EQ(g.nodes.size(), 1u) << what;
        EXPECT_EQ(g.nodes[0].op, "EmbeddingBag");
        EXPECT_EQ(g.nodes[0].GetString("mode", "sum"), sqrtn ? "sqrtn" : "mean");
        for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
          if (!backend) continue;
          auto after = RunGraph(g, {ids}, {}, *backend);
          ASSERT_TRUE(after.ok()) << after.status().ToString();
          EXPECT_LE(testing::RelativeError((*after)[0], (*before)[0]), 1e-6) << what << " " << backend->name();
          const float* out = (*after)[0].data<float>();
          const float two = sqrtn ? std::sqrt(2.0f) : 2.0f, three = sqrtn ? std::sqrt(3.0f) : 3.0f;
          EXPECT_NEAR(out[0], 4.0f / two, 1e-6) << what;      // rows 0 + 2, two of them
          EXPECT_EQ(out[2], 0.0f) << what;                    // no id: zeros
          EXPECT_NEAR(out[5], 100.0f / three, 1e-4) << what;  // 40 + 40 + 20, three
        }
      }
    }
  }
  // A count of other ids is not this bag's: the sum fuses, the division stays.
  Graph g = CombinedBagGraph(table, false, true, false, true);
  EXPECT_EQ(FuseMaskedEmbeddingBags(g), 1);
  EXPECT_EQ(g.OpCounts()["Div"], 1);
  auto fused = RunGraph(g, {ids, testing::MakeI64({3, 3}, {0, 0, 0, 0, -1, -1, 1, 1, -1})});
  ASSERT_TRUE(fused.ok()) << fused.status().ToString();
  EXPECT_NEAR((*fused)[0].data<float>()[0], 4.0f / 3.0f, 1e-6);
}

// The masked max as PyTorch code writes it: torch.where(mask, rows, -inf).amax(1) or
// rows.masked_fill(~mask, -inf).amax(1) (Where(padded, fill, rows)), the padded slots spelled
// ids < 0 or not ids >= 0; fills of -inf and the lowest float fuse into the max bag (an empty bag
// gives the fill, as the graph does), -1e9 does not (a row could hold less).
Graph MaskedMaxGraph(const Tensor& table, const std::string& form, float fill) {
  GraphBuilder b;
  int ids = b.Input("ids", DType::kI64, {-1, -1});
  int zero = b.Const("zero", testing::MakeI64({}, {0}));
  int rows = b.Op("Gather", {b.Const("w", table), b.Op("Clip", {ids, zero})});
  if (table.dtype() != DType::kF32) rows = b.Op("Cast", {rows}, {{"to", int64_t{1}}});  // a 16-bit table
  int axes_last = b.Const("axes_last", testing::MakeI64({1}, {-1}));
  int filler = b.Const("fill", testing::MakeF32({}, {fill}));
  int masked;
  if (form == "where") {
    masked = b.Op("Where", {b.Op("Unsqueeze", {b.Op("GreaterOrEqual", {ids, zero}), axes_last}), rows, filler});
  } else if (form == "masked_fill") {
    masked = b.Op("Where", {b.Op("Unsqueeze", {b.Op("Less", {ids, zero}), axes_last}), filler, rows});
  } else {  // masked_fill(~mask, fill)
    int invalid = b.Op("Not", {b.Op("GreaterOrEqual", {ids, zero})});
    masked = b.Op("Where", {b.Op("Unsqueeze", {invalid, axes_last}), filler, rows});
  }
  b.Output(b.Op("ReduceMax", {masked, b.Const("axes1", testing::MakeI64({1}, {1}))}, {{"keepdims", int64_t{0}}}));
  return b.graph();
}

TEST(EmbeddingBagFusion, MaskedMaxFusesIntoTheMaxBagWithItsFill) {
  std::mt19937_64 rng(9);
  const Tensor table = testing::RandomF32({50, 6}, rng);
  // Bags of 1 to 4 slots, some padded, one empty.
  const Tensor ids = testing::MakeI64({4, 4}, {3, 17, -1, -1, -1, -1, -1, -1, 49, 0, 7, 7, 22, -1, 5, -1});
  const float lowest = std::numeric_limits<float>::lowest(), inf = std::numeric_limits<float>::infinity();
  for (const char* form : {"where", "masked_fill", "not_valid"}) {
    for (const float fill : {-inf, lowest}) {
      const std::string what = std::string(form) + " fill " + std::to_string(fill);
      Graph g = MaskedMaxGraph(table, form, fill);
      const Graph written = g;
      auto before = RunGraph(g, {ids});
      ASSERT_TRUE(before.ok()) << before.status().ToString();
      // The graph as written: ReduceMax over -inf alone is -inf (the reductions start there).
      EXPECT_EQ((*before)[0].data<float>()[6], fill) << what;
      EXPECT_EQ(FuseMaskedEmbeddingBags(g), 1) << what;
      ASSERT_EQ(g.nodes.size(), 1u) << what;
      EXPECT_EQ(g.nodes[0].op, "EmbeddingBag");
      EXPECT_EQ(g.nodes[0].GetString("mode", "sum"), "max");
      for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
        if (!backend) continue;
        auto after = RunGraph(g, {ids}, {}, *backend);
        ASSERT_TRUE(after.ok()) << after.status().ToString();
        const float* got = (*after)[0].data<float>();
        const float* want = (*before)[0].data<float>();
        for (int64_t i = 0; i < (*before)[0].size(); ++i) {
          EXPECT_EQ(got[i], want[i]) << what << " " << backend->name() << " element " << i;
        }
        EXPECT_EQ(got[6], fill) << "the empty bag gives the fill";
        EXPECT_EQ(got[0], std::max(table.data<float>()[3 * 6], table.data<float>()[17 * 6]));
        auto unfused = RunGraph(written, {ids}, {}, *backend);
        ASSERT_TRUE(unfused.ok()) << unfused.status().ToString();
        EXPECT_EQ(testing::RelativeError((*unfused)[0], (*before)[0]), 0.0) << what << " " << backend->name();
      }
    }
  }
  Graph g = MaskedMaxGraph(table, "where", -1e9f);
  EXPECT_EQ(FuseMaskedEmbeddingBags(g), 0) << "a fill a row could be below";
  EXPECT_EQ(g.OpCounts()["ReduceMax"], 1);
  // `empty` is a max bag's alone.
  GraphBuilder b;
  b.Output(b.Op("EmbeddingBag", {b.Const("w", table), b.Input("ids", DType::kI64, {-1, -1})},
                {{"mode", std::string("sum")}, {"empty", -inf}}));
  const Status checked = CpuBackend().CheckGraph(b.graph());
  EXPECT_EQ(checked.code(), StatusCode::kInvalidArgument) << checked.ToString();
  EXPECT_NE(checked.message().find("`empty` is a max bag's"), std::string::npos) << checked.ToString();
}

// `table` [rows, dim] rounded to BF16 or FP16, as a trainer that kept its tables in 16 bits exports them.
Tensor SixteenBitTable(const Tensor& table, DType dtype) {
  Tensor out = Tensor::Zeros(dtype, table.shape());
  for (int64_t i = 0; i < table.size(); ++i) {
    const float v = table.data<float>()[i];
    out.data<uint16_t>()[i] = dtype == DType::kBF16 ? FloatToBF16(v) : FloatToHalf(v);
  }
  return out;
}

// A 16-bit table's rows cast to FP32 after the gather (PyTorch's `weight[ids].float()`): the sum and
// the max fuse with the 16-bit table as the bag's, which reads it as it is; the scores are those of
// the same values in an FP32 table. A cast to anything else does not fuse.
TEST(EmbeddingBagFusion, SixteenBitTablesCastAfterTheGatherFuse) {
  std::mt19937_64 rng(4);
  Tensor exact = testing::RandomF32({40, 8}, rng);
  for (int64_t i = 0; i < exact.size(); ++i) {  // values both 16-bit forms hold exactly
    exact.data<float>()[i] = std::round(exact.data<float>()[i] * 64.0f) / 64.0f;
  }
  const Tensor ids = testing::MakeI64({4, 3}, {3, 17, -1, -1, -1, -1, 39, 0, 7, 22, 22, 5});
  for (const DType dtype : {DType::kBF16, DType::kF16}) {
    const Tensor table = SixteenBitTable(exact, dtype);
    const std::string what = DTypeName(dtype);
    Graph sum = MaskedBagGraph("Clip", "GreaterOrEqual", false, table);
    Graph max = MaskedMaxGraph(table, "where", -std::numeric_limits<float>::infinity());
    Graph sum32 = MaskedBagGraph("Clip", "GreaterOrEqual", false, exact);
    Graph max32 = MaskedMaxGraph(exact, "where", -std::numeric_limits<float>::infinity());
    for (Graph* g : {&sum, &max, &sum32, &max32}) {
      ASSERT_EQ(FuseMaskedEmbeddingBags(*g), 1) << what;
      ASSERT_EQ(g->nodes.size(), 1u) << what;
      EXPECT_EQ(g->nodes[0].op, "EmbeddingBag");
    }
    EXPECT_EQ(sum.constants.at(sum.nodes[0].Input(0)).dtype(), dtype) << "the bag reads the 16-bit table";
    for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
      if (!backend) continue;
      for (auto [g, g32] : {std::pair{&sum, &sum32}, std::pair{&max, &max32}}) {
        auto got = RunGraph(*g, {ids}, {}, *backend);
        auto want = RunGraph(*g32, {ids}, {}, *backend);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        EXPECT_EQ(testing::RelativeError((*got)[0], (*want)[0]), 0.0) << what << " " << backend->name();
      }
    }
  }
  // Cast to FP16 (to = 10): the bag's sums are FP32, so it is not the bag.
  Graph g = MaskedBagGraph("Clip", "GreaterOrEqual", false, SixteenBitTable(exact, DType::kBF16));
  for (Node& n : g.nodes) {
    if (n.op == "Cast" && n.inputs[0] >= 0 && g.Producers()[static_cast<size_t>(n.inputs[0])] >= 0 &&
        g.nodes[static_cast<size_t>(g.Producers()[static_cast<size_t>(n.inputs[0])])].op == "Gather") {
      n.attrs["to"] = int64_t{10};
    }
  }
  EXPECT_EQ(FuseMaskedEmbeddingBags(g), 0);
}

// The pass runs before a model's nodes are checked (serving/model.cc): a node of the pattern short
// of inputs, as a fuzzed model had (a GreaterOrEqual with one), matches nothing and is read within
// its inputs (ASan checks).
TEST(EmbeddingBagFusion, NodesShortOfInputsMatchNothing) {
  Tensor table = testing::MakeF32({4, 2}, {1, 10, 2, 20, 3, 30, 4, 40});
  int fused_anyway = 0;
  for (const char* clamp : {"Clip", "Max", "Where"}) {
    for (const char* mask : {"GreaterOrEqual", "Greater", "NotEqual"}) {
      const Graph written = MaskedBagGraph(clamp, mask, false, table);
      for (size_t n = 0; n < written.nodes.size(); ++n) {
        for (size_t keep = 0; keep < written.nodes[n].inputs.size(); ++keep) {
          Graph g = written;
          g.nodes[n].inputs.resize(keep);
          const std::string what =
              std::string(clamp) + " " + mask + ": " + g.nodes[n].op + " with " + std::to_string(keep) + " inputs";
          if (FuseMaskedEmbeddingBags(g) == 0) continue;
          // Only a node the pattern does not read may be short and the rest still fuse (Where's
          // condition); it goes with the pattern, leaving a graph the CPU backend accepts.
          ++fused_anyway;
          EXPECT_TRUE(CpuBackend().CheckGraph(g).ok()) << what;
        }
      }
    }
  }
  EXPECT_EQ(fused_anyway, 6) << "Where's condition, with 0 or 1 of its 2 inputs, under each of 3 masks";
}

TEST(EmbeddingBagFusion, LeavesOtherReductionsAlone) {
  GraphBuilder b;
  int x = b.Input("x", DType::kF32, {-1, -1, 4});
  int axes1 = b.Const("axes1", testing::MakeI64({1}, {1}));
  b.Output(b.Op("ReduceSum", {b.Op("Mul", {x, x}), axes1}, {{"keepdims", int64_t{0}}}));
  EXPECT_EQ(FuseMaskedEmbeddingBags(b.graph()), 0);
}

TEST(RaggedInputs, OtherReadersGetPaddedIdsAndResultsMatch) {
  // ids feed a bag and, separately, a count of valid slots: the second reader needs padding.
  Tensor table = testing::MakeF32({4, 2}, {1, 10, 2, 20, 3, 30, 4, 40});
  GraphBuilder b;
  int ids = b.Input("ids", DType::kI64, {-1, -1});
  int w = b.Const("w", table);
  int zero = b.Const("zero", testing::MakeI64({}, {0}));
  b.Output(b.Op("EmbeddingBag", {w, ids}));
  int valid = b.Op("Cast", {b.Op("GreaterOrEqual", {ids, zero})}, {{"to", int64_t{7}}});
  int axes1 = b.Const("axes1", testing::MakeI64({1}, {1}));
  b.Output(b.Op("ReduceSum", {valid, axes1}, {{"keepdims", int64_t{0}}}));
  Graph g = b.graph();
  ASSERT_TRUE(ApplyRaggedInputs(g, {"ids"}).ok());
  EXPECT_EQ(g.OpCounts()["RaggedToPadded"], 1);
  ASSERT_EQ(g.inputs.size(), 2u);
  // Rows: [1, 3], [], [2].
  auto r = RunGraph(g, {testing::MakeI64({3}, {1, 3, 2}), testing::MakeI64({4}, {0, 2, 2, 3})}, {2});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].data<float>()[0], 6.0f);
  EXPECT_EQ((*r)[0].data<float>()[2], 0.0f);
  EXPECT_EQ((*r)[0].data<float>()[5], 30.0f);
  EXPECT_EQ((*r)[1].data<int64_t>()[0], 2);
  EXPECT_EQ((*r)[1].data<int64_t>()[1], 0);
  EXPECT_EQ((*r)[1].data<int64_t>()[2], 1);
}

}  // namespace
}  // namespace rankd
