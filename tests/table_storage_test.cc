// Embedding tables stored in 16 bits (StoreTablesAs, config `tables: {dtype: BF16}`): only tables
// read solely by bags are narrowed, each value rounded once; bags then pool exactly what they pool
// from a table written in 16 bits; the zoo models stay close to PyTorch; bad settings are refused.
#include <gtest/gtest.h>

#include <random>

#include "compile/passes.h"
#include "model/config.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;

Tensor RandomF32(Shape shape, std::mt19937_64& rng) {
  std::normal_distribution<float> val(0, 1);
  Tensor t = Tensor::Zeros(DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = val(rng);
  return t;
}

// bag(bag_only, ids) + bag(shared, ids), and shared also read by a Gather: only bag_only narrows.
struct TwoTables {
  Graph graph;
  int bag_only = -1, shared = -1;
};

TwoTables Build(const Tensor& a, const Tensor& b) {
  GraphBuilder g;
  TwoTables t;
  t.bag_only = g.Const("bag_only", a);
  t.shared = g.Const("shared", b);
  int ids = g.Input("ids", DType::kI64, {-1, 3});
  int x = g.Op("EmbeddingBag", {t.bag_only, ids}, {{"mode", std::string("sum")}});
  int y = g.Op("EmbeddingBag", {t.shared, ids}, {{"mode", std::string("mean")}});
  int row = g.Op("Gather", {t.shared, g.Input("row", DType::kI64, {-1})});
  g.Output(g.Op("Add", {g.Op("Add", {x, y}), row}));
  t.graph = g.graph();
  return t;
}

TEST(TableStorage, NarrowsOnlyTablesReadSolelyByBagsAndRoundsEachValueOnce) {
  std::mt19937_64 rng(7);
  Tensor a = RandomF32({50, 8}, rng), b = RandomF32({50, 8}, rng);
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    TwoTables t = Build(a, b);
    EXPECT_EQ(StoreTablesAs(t.graph, dtype), 1) << DTypeName(dtype);
    const Tensor& narrowed = t.graph.constants.at(t.bag_only);
    ASSERT_EQ(narrowed.dtype(), dtype);
    EXPECT_EQ(t.graph.values[static_cast<size_t>(t.bag_only)].dtype, dtype);
    EXPECT_EQ(narrowed.shape(), a.shape());
    for (int64_t i = 0; i < a.size(); ++i) {
      uint16_t want = dtype == DType::kBF16 ? FloatToBF16(a.data<float>()[i]) : FloatToHalf(a.data<float>()[i]);
      ASSERT_EQ(narrowed.data<uint16_t>()[i], want) << i;
    }
    EXPECT_EQ(t.graph.constants.at(t.shared).dtype(), DType::kF32);  // a Gather reads it too

    // The narrowed graph scores exactly as the graph written with the 16-bit table.
    Tensor written = Tensor::Zeros(dtype, a.shape());
    std::memcpy(written.raw(), narrowed.raw(), narrowed.bytes());
    TwoTables reference = Build(written, b);
    std::vector<Tensor> inputs = {testing::MakeI64({4, 3}, {0, 1, 2, -1, 49, 7, 3, -1, -1, 10, 10, 10}),
                                  testing::MakeI64({4}, {0, 5, 9, 49})};
    auto got = testing::RunGraph(t.graph, inputs);
    auto want = testing::RunGraph(reference.graph, inputs);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_EQ((*got)[0].size(), (*want)[0].size());
    for (int64_t i = 0; i < (*got)[0].size(); ++i) EXPECT_EQ((*got)[0].data<float>()[i], (*want)[0].data<float>()[i]);
  }
  TwoTables t = Build(a, b);
  EXPECT_EQ(StoreTablesAs(t.graph, DType::kF32), 0);
  EXPECT_EQ(t.graph.constants.at(t.bag_only).dtype(), DType::kF32);
}

TEST(TableStorage, ConfigChoosesTheDtypeAndRefusesOthers) {
  auto c = ParseModelConfig("tables: {dtype: BF16}", true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->table_dtype, DType::kBF16);
  EXPECT_EQ(ParseModelConfig("tables: {dtype: FP16}", true)->table_dtype, DType::kF16);
  EXPECT_EQ(ParseModelConfig("{}", false)->table_dtype, DType::kF32);
  EXPECT_EQ(ParseModelConfig("tables:", true)->table_dtype, DType::kF32);
  for (const char* bad : {"tables: {dtype: INT8}", "tables: {dtype: 3}", "tables: [BF16]"}) {
    auto r = ParseModelConfig(bad, true);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("tables"), std::string::npos) << r.status().ToString();
  }
  ModelOptions options;
  options.table_dtype = "INT8";
  EXPECT_FALSE(Model::Load(testing::SourcePath("models/zoo/dlrm_dcnv2"), -1, options).ok());
}

// The zoo models with BF16 bag tables: DLRM's 26 tables narrowed, half their memory, scores within
// bf16's rounding of PyTorch's; DIN's tables are all read by Gathers (lookups, not bags) and stay.
TEST(TableStorage, ZooModelsWithBf16TablesStayCloseToPyTorch) {
  for (const std::string name : {"dlrm_dcnv2", "din"}) {
    auto fp32 = Model::Load(testing::SourcePath("models/zoo/" + name), -1);
    ModelOptions options;
    options.table_dtype = "BF16";
    auto bf16 = Model::Load(testing::SourcePath("models/zoo/" + name), -1, options);
    ASSERT_TRUE(fp32.ok() && bf16.ok()) << bf16.status().ToString();
    int64_t before = (*fp32)->graph().ConstantBytes(), after = (*bf16)->graph().ConstantBytes();
    if (name == "dlrm_dcnv2") {
      EXPECT_EQ((*bf16)->load_report().narrowed_tables, 26);
      EXPECT_LT(after, before);
      testing::ExpectZooScores(**bf16, name, 2e-2);
    } else {
      EXPECT_EQ((*bf16)->load_report().narrowed_tables, 0);
      EXPECT_EQ(after, before);
    }
  }
}

}  // namespace
}  // namespace rankd
