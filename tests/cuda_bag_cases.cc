// The embedding bags' cross-backend cases (cuda_op_cases.h): bags alone, weighted, and every form
// of their concatenation (lengths, widths, dtypes, pooling modes, launch shapes).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda_op_cases.h"

namespace rankd::testing {
namespace {

// The inputs of a ragged bag weighted per id (EmbeddingBag's fourth input): BagInputs' and the
// weights, in [-2, 2] with every seventh 0.
std::vector<int> WeightedBagInputs(GraphBuilder& g, std::vector<Tensor>& in, std::mt19937_64& rng,
                                   const std::string& tag, int64_t rows, int64_t dim, int64_t bags, int64_t max_len,
                                   double empty, DType table_dtype) {
  std::vector<int> ins = BagInputs(g, in, rng, tag, rows, dim, bags, max_len, empty, 0.1, table_dtype, false);
  const int64_t total = in[in.size() - 2].size();
  Tensor weights = Random(DType::kF32, {total}, rng);
  for (int64_t i = 0; i < total; i += 7) weights.data<float>()[i] = 0.0f;
  in.push_back(std::move(weights));
  ins.push_back(g.Input("weights" + tag, DType::kF32, {total}));
  return ins;
}

}  // namespace

// The inputs of a bag (table, ids or values + offsets) with empty bags and -1 slots at the given
// rates; `tag` names its graph inputs.
std::vector<int> BagInputs(GraphBuilder& g, std::vector<Tensor>& in, std::mt19937_64& rng, const std::string& tag,
                           int64_t rows, int64_t dim, int64_t bags, int64_t max_len, double empty, double minus_one,
                           DType table_dtype, bool padded) {
  std::uniform_int_distribution<int64_t> id(0, rows - 1), len(1, max_len);
  std::uniform_real_distribution<double> coin(0, 1);
  std::vector<int64_t> values, offsets{0}, pad(static_cast<size_t>(bags * max_len), -1);
  for (int64_t b = 0; b < bags; ++b) {
    int64_t n = coin(rng) < empty ? 0 : len(rng);
    for (int64_t j = 0; j < n; ++j) {
      int64_t v = coin(rng) < minus_one ? -1 : id(rng);
      values.push_back(v);
      pad[static_cast<size_t>(b * max_len + j)] = v;
    }
    offsets.push_back(static_cast<int64_t>(values.size()));
  }
  int table = g.Const("table" + tag, Random(table_dtype, {rows, dim}, rng));
  if (padded) {
    in.push_back(testing::MakeI64({bags, max_len}, pad));
    return {table, g.Input("ids" + tag, DType::kI64, {bags, max_len})};
  }
  in.push_back(testing::MakeI64({static_cast<int64_t>(values.size())}, values));
  in.push_back(testing::MakeI64({bags + 1}, offsets));
  return {table, g.Input("values" + tag, DType::kI64, {static_cast<int64_t>(values.size())}),
          g.Input("offsets" + tag, DType::kI64, {bags + 1})};
}

// A ragged (or padded) bag.
OpCase Bag(const char* name, int64_t rows, int64_t dim, int64_t bags, int64_t max_len, double empty, double minus_one,
           const char* mode, DType table_dtype, bool padded) {
  return {name,
          [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>& ragged, std::mt19937_64& rng) {
            std::vector<int> ins =
                BagInputs(g, in, rng, "", rows, dim, bags, max_len, empty, minus_one, table_dtype, padded);
            g.Output(g.Op("EmbeddingBag", ins, {{"mode", std::string(mode)}}));
            if (!padded) ragged.push_back(max_len);
          },
          table_dtype == DType::kF32 ? 1e-5 : 1e-3};
}

// A weighted bag alone (the sum, and TensorFlow's weighted mean and sqrtn).
OpCase WeightedBag(const char* name, int64_t rows, int64_t dim, int64_t bags, int64_t max_len, double empty,
                   const char* mode, DType table_dtype) {
  return {name,
          [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>& ragged, std::mt19937_64& rng) {
            std::vector<int> ins = WeightedBagInputs(g, in, rng, "", rows, dim, bags, max_len, empty, table_dtype);
            g.Output(g.Op("EmbeddingBag", ins, {{"mode", std::string(mode)}}));
            ragged.push_back(max_len);
          },
          table_dtype == DType::kF32 ? 1e-5 : 1e-3};
}

// Weighted sums among the parts of a concatenation, every way a part is pooled: short BF16 bags
// of 128 and FP32 of 64 (lane groups), long BF16 bags (split over warps in a small launch), FP16
// rows of 24 (three 16-byte pieces), FP32 rows of 6 (an element a lane), beside an unweighted bag
// and a copied part. Past 16,384 bags in all the launch takes its large shape.
OpCase BagsConcatWeighted(const char* name, int64_t rows) {
  return {name,
          [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            in.push_back(Random(DType::kF32, {rows, 4}, rng));
            std::vector<int> ins{g.Input("x", DType::kF32, {rows, 4})};
            auto add = [&](const std::vector<int>& part) { ins.insert(ins.end(), part.begin(), part.end()); };
            add(WeightedBagInputs(g, in, rng, "0", 700, 128, rows, 3, 0.1, DType::kBF16));
            add(WeightedBagInputs(g, in, rng, "1", 400, 64, rows, 12, 0.1, DType::kF32));
            add(WeightedBagInputs(g, in, rng, "2", 900, 128, rows, 100, 0.05, DType::kBF16));
            add(BagInputs(g, in, rng, "3", 300, 128, rows, 5, 0.1, 0.1, DType::kF32, false));
            add(WeightedBagInputs(g, in, rng, "4", 500, 24, rows, 20, 0.05, DType::kF16));
            add(WeightedBagInputs(g, in, rng, "5", 70, 6, rows, 4, 0.2, DType::kF32));
            g.Output(g.Op("ConcatEmbeddingBags", ins,
                          {{"parts", std::vector<int64_t>{1, 4, 4, 4, 3, 4, 4}},
                           {"modes", std::vector<int64_t>{0, 0, 0, 0, 1, 0, 0}}}));
          },
          1e-3};
}

// ConcatEmbeddingBags over `parts` parts cycling through: a copied FP32 value of width 5, ragged
// FP32 bags of width 128 (16-byte path), padded FP16 of 16, ragged BF16 of 3 and FP32 of 6 (the
// element-wise path: odd width, a column not a multiple of 4), a column lookup of width 8, mean,
// sqrtn and sum.
OpCase BagsConcat(const char* name, int parts, int64_t bags) {
  return {name,
          [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            std::vector<int> ins;
            std::vector<int64_t> counts, modes, columns;
            for (int p = 0; p < parts; ++p) {
              std::string tag = std::to_string(p);
              std::vector<int> part;
              int64_t column = -1;
              switch (p % 6) {
                case 5: {  // a lookup of one column, negative ids counting from the table's end
                  std::vector<int64_t> ids(static_cast<size_t>(bags * 3));
                  std::uniform_int_distribution<int64_t> id(-40, 39);
                  for (int64_t& v : ids) v = id(rng);
                  in.push_back(testing::MakeI64({bags, 3}, ids));
                  part = {g.Const("lookup" + tag, Random(DType::kF32, {40, 8}, rng)),
                          g.Input("ids" + tag, DType::kI64, {bags, 3})};
                  column = p % 3;
                  break;
                }
                case 0:
                  in.push_back(Random(DType::kF32, {bags, 5}, rng));
                  part = {g.Input("x" + tag, DType::kF32, {bags, 5})};
                  break;
                case 1:
                  part = BagInputs(g, in, rng, tag, 900, 128, bags, 30, 0.1, 0.1, DType::kF32, false);
                  break;
                case 2:
                  part = BagInputs(g, in, rng, tag, 300, 16, bags, 4, 0.1, 0.2, DType::kF16, true);
                  break;
                case 3:
                  part = BagInputs(g, in, rng, tag, 50, 3, bags, 9, 0.3, 0.1, DType::kBF16, false);
                  break;
                default:
                  part = BagInputs(g, in, rng, tag, 70, 6, bags, 2, 0.0, 0.5, DType::kF32, false);
                  break;
              }
              ins.insert(ins.end(), part.begin(), part.end());
              counts.push_back(static_cast<int64_t>(part.size()));
              modes.push_back(part.size() > 1 && p % 2 == 0 && column < 0 ? 1 + p / 2 % 2 : 0);  // mean, sqrtn
              columns.push_back(column);
            }
            g.Output(g.Op("ConcatEmbeddingBags", ins, {{"parts", counts}, {"modes", modes}, {"columns", columns}}));
          },
          1e-3};
}

// Bags longer than a warp's chunk of ids (up to 100, as W1's longest feature), split over 2, 4 and
// 8 warps (with 37 rows a block's last warps have no row): BF16 rows of 128 (half a warp each, two
// lane groups), ragged, about 50 ids a bag; FP16 rows of 24 (three 16-byte pieces, a lane of every
// four idle), ragged, about 20; FP32 rows of 264 (wider than a warp's 16-byte loads), 90 padded
// slots a bag; sum, mean and sqrtn. With more than 16,384 bags in all the launch takes its large shape,
// a lane group per bag (two groups a warp for the BF16 rows, eight for the FP16, one for the
// FP32, which takes its 264 columns in two passes).
OpCase BagsConcatLong(const char* name, int64_t rows) {
  return {name,
          [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            std::vector<int> ins,
                part = BagInputs(g, in, rng, "0", 2000, 128, rows, 100, 0.05, 0.1, DType::kBF16, false);
            ins.insert(ins.end(), part.begin(), part.end());
            part = BagInputs(g, in, rng, "1", 500, 24, rows, 40, 0.05, 0.1, DType::kF16, false);
            ins.insert(ins.end(), part.begin(), part.end());
            part = BagInputs(g, in, rng, "2", 300, 264, rows, 90, 0.05, 0.1, DType::kF32, true);
            ins.insert(ins.end(), part.begin(), part.end());
            g.Output(g.Op("ConcatEmbeddingBags", ins,
                          {{"parts", std::vector<int64_t>{3, 3, 2}}, {"modes", std::vector<int64_t>{0, 2, 1}}}));
          },
          1e-3};
}

// W1's mix in a small launch: short bags (about 2 ids, as most of W1's features) pooled by lane
// groups, four a warp (rows of 128 BF16 or FP16 elements, or 64 FP32), beside a long BF16 bag
// split over warps, bags of about 12 ids (lane groups past a tiny launch, a warp each in one), a
// copied part, and a column lookup of width 128 (lane groups too); ragged and padded, some ids
// -1, some bags empty, sum and mean.
OpCase BagsConcatShort(const char* name, int64_t rows) {
  return {name,
          [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            in.push_back(Random(DType::kF32, {rows, 128}, rng));
            std::vector<int> ins{g.Input("x", DType::kF32, {rows, 128})};
            auto add = [&](const std::vector<int>& part) { ins.insert(ins.end(), part.begin(), part.end()); };
            add(BagInputs(g, in, rng, "0", 700, 128, rows, 3, 0.1, 0.1, DType::kBF16, false));
            add(BagInputs(g, in, rng, "1", 400, 64, rows, 4, 0.1, 0.2, DType::kF32, false));
            add(BagInputs(g, in, rng, "2", 900, 128, rows, 100, 0.05, 0.1, DType::kBF16, false));
            add(BagInputs(g, in, rng, "3", 300, 128, rows, 2, 0.0, 0.3, DType::kF16, true));
            add(BagInputs(g, in, rng, "4", 500, 128, rows, 24, 0.05, 0.1, DType::kBF16, false));
            std::vector<int64_t> ids(static_cast<size_t>(rows * 2));
            std::uniform_int_distribution<int64_t> id(-60, 59);
            for (int64_t& v : ids) v = id(rng);
            in.push_back(testing::MakeI64({rows, 2}, ids));
            ins.push_back(g.Const("lookup", Random(DType::kBF16, {60, 128}, rng)));
            ins.push_back(g.Input("lookup_ids", DType::kI64, {rows, 2}));
            g.Output(g.Op("ConcatEmbeddingBags", ins,
                          {{"parts", std::vector<int64_t>{1, 3, 3, 3, 2, 3, 2}},
                           {"modes", std::vector<int64_t>{0, 1, 0, 0, 1, 0, 0}},
                           {"columns", std::vector<int64_t>{-1, -1, -1, -1, -1, -1, 1}}}));
          },
          1e-3};
}

// A copied part beside a bag with no ids at all (every bag empty: zeros, its ids a 0-size input).
OpCase BagsConcatAllEmpty() {
  return {"concat_bags_all_empty",
          [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            in.push_back(Random(DType::kF32, {9, 4}, rng));
            std::vector<int> ins{g.Input("x", DType::kF32, {9, 4})};
            std::vector<int> bag = BagInputs(g, in, rng, "", 50, 8, 9, 3, 1.0, 0.0, DType::kF32, false);
            ins.insert(ins.end(), bag.begin(), bag.end());
            g.Output(g.Op("ConcatEmbeddingBags", ins,
                          {{"parts", std::vector<int64_t>{1, 3}}, {"modes", std::vector<int64_t>{0, 0}}}));
          }};
}

}  // namespace rankd::testing
