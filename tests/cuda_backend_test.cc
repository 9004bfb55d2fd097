// The CUDA backend against the CPU backend: every op on fresh random inputs and edge cases (odd
// sizes, broadcasts, empty bags, all -1, length-0 sequences), the zoo models end to end, bad ids,
// and concurrent executors (which kernel takes a product: cuda_products_test.cc). Skipped where no
// CUDA device is present (CI); run on the GPU machine.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#if RANKD_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"
#include "backend/cuda/device_health.h"
#include "runtime/cuda/cuda_executor.h"
#endif
#include "common/host_allocator.h"
#include "compile/plan.h"
#include "frontend/kserve_json.h"
#include "model/key_index.h"
#include "model/ops/hash_strings.h"
#include "model/ops/keyed_rows.h"
#include "runtime/backends.h"
#include "serving/model.h"
#include "serving/string_ids.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;

Tensor Random(DType dtype, Shape shape, std::mt19937_64& rng, double lo = -2, double hi = 2) {
  Tensor t = Tensor::Zeros(dtype, std::move(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.size(); ++i) {
    double v = u(rng);
    switch (dtype) {
      case DType::kF32:
        t.data<float>()[i] = static_cast<float>(v);
        break;
      case DType::kF64:
        t.data<double>()[i] = v;
        break;
      case DType::kF16:
        t.data<uint16_t>()[i] = FloatToHalf(static_cast<float>(v));
        break;
      case DType::kBF16:
        t.data<uint16_t>()[i] = FloatToBF16(static_cast<float>(v));
        break;
      case DType::kI32:
        t.data<int32_t>()[i] = static_cast<int32_t>(std::floor(v));
        break;
      case DType::kI64:
        t.data<int64_t>()[i] = static_cast<int64_t>(std::floor(v));
        break;
      case DType::kBool:
        t.data<uint8_t>()[i] = v > (lo + hi) / 2;
        break;
      default:
        ADD_FAILURE() << "no random data for " << DTypeName(dtype);
    }
  }
  return t;
}

// One op case: a graph and its inputs, built fresh from a seeded generator.
struct OpCase {
  const char* name;
  std::function<void(GraphBuilder&, std::vector<Tensor>&, std::vector<int64_t>&, std::mt19937_64&)> build;
  double tolerance = 1e-5;
};

// x = graph input with random data.
int In(GraphBuilder& b, std::vector<Tensor>& inputs, std::mt19937_64& rng, DType dtype, Shape shape, double lo = -2,
       double hi = 2) {
  inputs.push_back(Random(dtype, shape, rng, lo, hi));
  return b.Input("x" + std::to_string(inputs.size()), dtype, shape);
}

OpCase Binary(const char* name, const char* op, DType dtype, Shape a, Shape b, double lo = -2, double hi = 2,
              std::map<std::string, AttributeValue> attrs = {}) {
  return {name, [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            int x = In(g, in, rng, dtype, a, lo, hi), y = In(g, in, rng, dtype, b, lo, hi);
            g.Output(g.Op(op, {x, y}, attrs));
          }};
}

OpCase Unary(const char* name, const char* op, DType dtype, Shape a, double lo = -2, double hi = 2) {
  return {name, [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            g.Output(g.Op(op, {In(g, in, rng, dtype, a, lo, hi)}));
          }};
}

OpCase Cast(const char* name, DType from, DType to) {
  return {name,
          [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            g.Output(g.Op("Cast", {In(g, in, rng, from, {5, 33}, -100, 100)},
                          {{"to", static_cast<int64_t>(DTypeToOnnx(to))}}));
          },
          1e-3};
}

OpCase MatMul(const char* name, Shape a, Shape b) {
  return {name, [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            g.Output(g.Op("MatMul", {In(g, in, rng, DType::kF32, a), In(g, in, rng, DType::kF32, b)}));
          }};
}

// MatMul with the epilogue FuseGemmEpilogues gives it: a bias row as input 2, maybe an
// activation (Relu, GeluTanh or Sigmoid; empty: none).
OpCase MatMulEpilogue(const char* name, Shape a, int64_t n, bool bias, const char* activation) {
  return {name, [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            std::vector<int> ins{In(g, in, rng, DType::kF32, a), g.Const("w", Random(DType::kF32, {a.back(), n}, rng))};
            if (bias) ins.push_back(g.Const("bias", Random(DType::kF32, {n}, rng)));
            std::map<std::string, AttributeValue> attrs;
            if (*activation) attrs["activation"] = std::string(activation);
            g.Output(g.Op("MatMul", ins, attrs));
          }};
}

// Gemm with a row of biases as C and the GELU FuseGemmEpilogues gives it.
OpCase GemmGelu(const char* name, int64_t m, int64_t n, int64_t k) {
  return {name, [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            int a = In(g, in, rng, DType::kF32, {m, k});
            int w = g.Const("w", Random(DType::kF32, {n, k}, rng));
            g.Output(g.Op("Gemm", {a, w, g.Const("c", Random(DType::kF32, {n}, rng))},
                          {{"transB", int64_t{1}}, {"alpha", 2.5f}, {"activation", std::string("GeluTanh")}}));
          }};
}

OpCase Gemm(const char* name, int64_t m, int64_t n, int64_t k, bool ta, bool tb, Shape c, float alpha, float beta) {
  return {name, [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            int a = In(g, in, rng, DType::kF32, ta ? Shape{k, m} : Shape{m, k});
            int w = g.Const("w", Random(DType::kF32, tb ? Shape{n, k} : Shape{k, n}, rng));
            std::vector<int> ins{a, w};
            if (!c.empty()) ins.push_back(g.Const("c", Random(DType::kF32, c, rng)));
            g.Output(g.Op("Gemm", ins,
                          {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}, {"alpha", alpha}, {"beta", beta}}));
          }};
}

OpCase Reduce(const char* name, const char* op, DType dtype, Shape a, std::vector<int64_t> axes, int64_t keep) {
  return {name, [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            int x = In(g, in, rng, dtype, a, -50, 50);
            std::vector<int> ins{x};
            if (!axes.empty())
              ins.push_back(g.Const("axes", testing::MakeI64({static_cast<int64_t>(axes.size())}, axes)));
            g.Output(g.Op(op, ins, {{"keepdims", keep}}));
          }};
}

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

// Bytes a GPU reads in place: page-locked where a device is present, else the heap (the cases are
// then only built, not run). Kept for the process: the cases' records point into them.
uint8_t* StringBytes(size_t n) {
#if RANKD_HAVE_CUDA
  void* p = nullptr;
  if (cudaHostAlloc(&p, n, cudaHostAllocPortable) == cudaSuccess) return static_cast<uint8_t*>(p);
  cudaGetLastError();
#endif
  return new uint8_t[n];
}

// HashStrings over random strings of 0 to 150 random bytes (every length class of the three
// hashes), a few prehashed records and padded rows' zero records among them, packed as
// StringRecords packs them.
OpCase HashStringsCase(const char* name, const char* function, DType dtype) {
  return {name,
          [=](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
            const int64_t count = 777;
            std::vector<int64_t> lengths(count);
            int64_t total = 0;
            for (int64_t& len : lengths) total += len = static_cast<int64_t>(rng() % 151);
            uint8_t* bytes = StringBytes(static_cast<size_t>((total + 7) / 8 * 8 + hash_strings::kTailBytes));
            for (int64_t b = 0; b < total; ++b) bytes[b] = static_cast<uint8_t>(rng());
            Tensor records = Tensor::Zeros(DType::kI64, {count, 2});
            int64_t* r = records.data<int64_t>();
            for (int64_t i = 0, at = 0; i < count; at += lengths[static_cast<size_t>(i)], ++i) {
              const bool prehashed = i % 97 == 5, padding = i % 101 == 7;  // a padded row's record is zeros
              r[2 * i] = prehashed ? i : padding ? 0 : static_cast<int64_t>(reinterpret_cast<uintptr_t>(bytes + at));
              r[2 * i + 1] = prehashed ? hash_strings::kPrehashed : padding ? 0 : lengths[static_cast<size_t>(i)];
            }
            in.push_back(records);
            const int x = g.Input("records", DType::kI64, {count, 2});
            g.Output(g.Op("HashStrings", {x},
                          {{"function", std::string(function)},
                           {"seed", static_cast<int64_t>(rng())},
                           {"buckets", static_cast<int64_t>(rng() % 1000000 + 1)},
                           {"dtype", std::string(DTypeName(dtype))}}));
          },
          0};
}

std::vector<OpCase> Cases() {
  using S = Shape;
  const DType f = DType::kF32, i64 = DType::kI64, b = DType::kBool;
  std::vector<OpCase> c = {
      Binary("add_broadcast", "Add", f, S{3, 1, 5}, S{4, 1}),
      Binary("sub_scalar", "Sub", f, S{1025}, S{}),
      Binary("mul_same", "Mul", f, S{2, 3, 17}, S{2, 3, 17}),
      Binary("div_float", "Div", f, S{7, 9}, S{9}, 0.5, 3),
      Binary("div_int_by_zero", "Div", i64, S{64}, S{64}, -3, 3),
      Binary("add_int64", "Add", i64, S{3, 5}, S{5}, -1000, 1000),
      Binary("max", "Max", f, S{4, 6}, S{6}),
      Binary("min", "Min", f, S{4, 6}, S{4, 1}),
      Binary("pow", "Pow", f, S{33}, S{33}, 0.5, 2),
      // Remainders of mixed signs, by 0 and by -1, with the divisor's sign and with the dividend's.
      Binary("mod_int", "Mod", i64, S{3, 64}, S{64}, -9, 9),
      Binary("mod_int_fmod", "Mod", i64, S{3, 64}, S{64}, -9, 9, {{"fmod", int64_t{1}}}),
      Binary("mod_float_fmod", "Mod", f, S{7, 9}, S{9}, 0.5, 3, {{"fmod", int64_t{1}}}),
      Binary("equal_int", "Equal", i64, S{50}, S{50}, -2, 2),
      Binary("greater", "Greater", f, S{3, 7}, S{7}),
      Binary("greater_or_equal_int", "GreaterOrEqual", i64, S{3, 7}, S{1}, -3, 3),
      Binary("less", "Less", f, S{10}, S{10}),
      Binary("less_or_equal", "LessOrEqual", f, S{2, 10}, S{10}),
      Binary("and", "And", b, S{40}, S{40}),
      Binary("or", "Or", b, S{5, 8}, S{8}),
      Binary("xor", "Xor", b, S{40}, S{40}),
      Unary("not", "Not", b, S{77}),
      Unary("sigmoid", "Sigmoid", f, S{3, 333}, -8, 8),
      Unary("tanh", "Tanh", f, S{100}),
      Unary("erf", "Erf", f, S{100}),
      Unary("sqrt", "Sqrt", f, S{100}, 0, 9),
      Unary("exp", "Exp", f, S{100}),
      Unary("log", "Log", f, S{100}, 0.01, 9),
      Unary("reciprocal", "Reciprocal", f, S{100}, 0.5, 9),
      Unary("floor", "Floor", f, S{100}),
      Unary("ceil", "Ceil", f, S{100}),
      Unary("neg_int", "Neg", i64, S{100}, -9, 9),
      Unary("abs", "Abs", f, S{100}),
      Unary("relu", "Relu", f, S{1, 1}),
      Unary("relu_big", "Relu", f, S{4099}),
      Cast("cast_f32_f16", f, DType::kF16),
      Cast("cast_f16_f32", DType::kF16, f),
      Cast("cast_f32_bf16", f, DType::kBF16),
      Cast("cast_f32_i64", f, i64),
      Cast("cast_i64_f32", i64, f),
      Cast("cast_bool_f32", b, f),
      Cast("cast_f32_bool", f, b),
      MatMul("matmul_2d", S{5, 7}, S{7, 3}),
      MatMul("matmul_tall", S{2, 5, 7}, S{7, 3}),
      MatMul("matmul_batched", S{2, 5, 7}, S{2, 7, 3}),
      MatMul("matmul_shared_a", S{5, 7}, S{4, 7, 3}),
      MatMul("matmul_broadcast", S{2, 1, 5, 7}, S{3, 7, 2}),
      MatMul("matmul_vectors", S{7}, S{7, 3}),
      MatMul("matmul_large", S{300, 257}, S{257, 129}),
      MatMulEpilogue("matmul_bias_relu", S{3, 50, 64}, 80, true, "Relu"),
      MatMulEpilogue("matmul_bias", S{7, 33}, 5, true, ""),
      MatMulEpilogue("matmul_relu", S{2, 2, 9, 17}, 1, false, "Relu"),
      MatMulEpilogue("matmul_bias_gelu", S{3, 50, 64}, 80, true, "GeluTanh"),
      MatMulEpilogue("matmul_gelu", S{2, 9, 17}, 24, false, "GeluTanh"),
      GemmGelu("gemm_bias_gelu", 37, 48, 40),
      Gemm("gemm_bias", 33, 65, 17, false, false, S{65}, 1.0f, 1.0f),
      Gemm("gemm_trans", 9, 5, 13, true, true, S{1, 5}, 1.0f, 1.0f),
      Gemm("gemm_column_bias", 9, 5, 13, false, true, S{9, 1}, 0.5f, 2.0f),
      Gemm("gemm_no_c", 1, 300, 64, false, false, S{}, 1.0f, 1.0f),
      Gemm("gemm_scalar_c", 4, 4, 4, false, false, S{}, 2.0f, 1.0f),
      // Few rows with a weight matrix: in bf16 the few-rows kernel (small_rows_gemm.h), weights
      // [K, N] (its transposed copy) and [N, K], one to eight rows, k split over one to eight
      // warps, column counts no block divides.
      MatMulEpilogue("matmul_few_rows_bias_relu", S{1, 256}, 40, true, "Relu"),
      MatMulEpilogue("matmul_few_rows_gelu", S{3, 64}, 24, false, "GeluTanh"),
      MatMulEpilogue("matmul_few_rows_split", S{6, 1024}, 37, true, ""),  // four warps to a column group
      GemmGelu("gemm_few_rows_bias_gelu", 8, 48, 136),
      Gemm("gemm_few_rows_trans_b", 5, 71, 64, false, true, S{}, 1.0f, 1.0f),
      Gemm("gemm_few_rows_bias", 2, 9, 3456, false, false, S{9}, 0.5f, 1.0f),
      Gemm("gemm_few_rows_one_column", 3, 1, 256, false, true, S{1}, 1.0f, 1.0f),  // C added, not a bias
      Gemm("gemm_few_rows_column_c", 4, 24, 64, false, false, S{4, 1}, 0.5f, 2.0f),
      // Few columns, many rows: with bf16 the few-rows kernel takes them transposed.
      Gemm("gemm_few_columns_one_column_bias", 300, 1, 256, false, true, S{1}, 1.0f, 1.0f),
      Gemm("gemm_few_columns_c", 50, 5, 40, false, false, S{50, 5}, 0.5f, 2.0f),
      MatMulEpilogue("matmul_few_columns_bias_sigmoid", S{2, 70, 64}, 3, true, "Sigmoid"),
      MatMulEpilogue("matmul_sigmoid", S{33, 48}, 20, false, "Sigmoid"),  // cuBLASLt, then the sigmoid
      Reduce("reduce_sum_axis1", "ReduceSum", f, S{4, 37, 3}, {1}, 1),
      Reduce("reduce_mean_all", "ReduceMean", f, S{5, 300}, {}, 0),
      Reduce("reduce_max_axes02", "ReduceMax", f, S{3, 4, 5}, {0, 2}, 0),
      Reduce("reduce_min_int", "ReduceMin", i64, S{6, 9}, {-1}, 1),
      // At most 16 reduced per output (a thread each), many outputs: MMoE's sum over its experts.
      Reduce("reduce_sum_few_many", "ReduceSum", f, S{300, 4, 33}, {1}, 0),
      Reduce("reduce_mean_sixteen", "ReduceMean", f, S{7, 16, 5}, {1}, 1),
      Reduce("reduce_max_seventeen", "ReduceMax", f, S{7, 17, 5}, {1}, 1),
      Bag("bag_sum", 1000, 16, 64, 12, 0.2, 0.1, "sum", f, false),
      Bag("bag_mean", 1000, 16, 64, 12, 0.2, 0.1, "mean", f, false),
      Bag("bag_padded", 500, 8, 33, 7, 0.1, 0.2, "sum", f, true),
      Bag("bag_all_empty", 50, 4, 9, 3, 1.0, 0.0, "sum", f, false),
      Bag("bag_all_minus_one", 50, 4, 9, 3, 0.0, 1.0, "mean", f, false),
      Bag("bag_fp16", 3000, 64, 200, 40, 0.05, 0.05, "sum", DType::kF16, false),
      Bag("bag_bf16_mean", 3000, 32, 100, 40, 0.05, 0.05, "mean", DType::kBF16, false),
      Bag("bag_sqrtn", 1000, 16, 64, 12, 0.2, 0.1, "sqrtn", f, false),
      Bag("bag_max", 1000, 16, 64, 12, 0.2, 0.1, "max", f, false),
      Bag("bag_fp16_max_padded", 3000, 64, 100, 40, 0.05, 0.3, "max", DType::kF16, true),
      Bag("bag_bf16_sqrtn_padded", 3000, 32, 100, 40, 0.05, 0.05, "sqrtn", DType::kBF16, true),
      Bag("bag_wide", 100, 300, 20, 5, 0.0, 0.0, "sum", f, false),
      Bag("bag_one_row", 10, 3, 1, 1, 0.0, 0.0, "sum", f, false),
      WeightedBag("bag_weighted_sum", 1000, 16, 64, 12, 0.2, "sum", f),
      WeightedBag("bag_weighted_mean_bf16", 3000, 32, 100, 40, 0.05, "mean", DType::kBF16),
      WeightedBag("bag_weighted_sqrtn_wide", 100, 300, 20, 5, 0.0, "sqrtn", f),
      BagsConcatWeighted("concat_bags_weighted_one_row", 1),
      BagsConcatWeighted("concat_bags_weighted_37", 37),
      BagsConcatWeighted("concat_bags_weighted_700", 700),
      BagsConcatWeighted("concat_bags_weighted_large", 3000),
      BagsConcat("concat_bags", 6, 67),
      BagsConcat("concat_bags_one_row", 5, 1),
      BagsConcat("concat_bags_two_launches", 61, 40),
      BagsConcat("concat_bags_large_launch", 6,
                 3001),  // 18,006 bags (a last warp with one real bag): lane groups, copies, lookups
      BagsConcatAllEmpty(),
      BagsConcatShort("concat_bags_short", 37),
      BagsConcatShort("concat_bags_short_small_launch", 1500),  // 9,000 bags: more blocks an SM than below 4,096
      BagsConcat("concat_bags_small_launch", 6, 1000),
      BagsConcatLong("concat_bags_long", 37),
      BagsConcatLong("concat_bags_long_large_launch", 5500),
  };
  c.push_back({"transpose", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 g.Output(g.Op("Transpose", {In(g, in, rng, DType::kF32, {3, 4, 5})},
                               {{"perm", std::vector<int64_t>{2, 0, 1}}}));
               }});
  // Ops that move no data at these shapes are aliases (OpSchema::moves_no_data): one a graph output
  // over a graph input's bytes, the others read by the one step that runs.
  c.push_back({"aliases_that_move_no_data",
               [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int cast = g.Op("Cast", {In(g, in, rng, DType::kF32, {5, 1, 4})}, {{"to", int64_t{1}}});
                 int moved = g.Op("Transpose", {cast}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
                 int expanded = g.Op("Expand", {moved, g.Const("shape", testing::MakeI64({2}, {1, 4}))});
                 g.Output(g.Op("Relu", {g.Op("Concat", {expanded}, {{"axis", int64_t{0}}})}));
                 g.Output(cast);
               }});
  // Ops that reshape or alias their input, through a chain the plan cannot drop.
  c.push_back({"reshapes", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int x = g.Op("Relu", {In(g, in, rng, DType::kF32, {2, 3, 4})});
                 int r = g.Op("Reshape", {x, g.Const("to", testing::MakeI64({2}, {4, 6}))});
                 int u = g.Op("Unsqueeze", {r, g.Const("ua", testing::MakeI64({1}, {1}))});
                 int q = g.Op("Squeeze", {g.Op("Neg", {u}), g.Const("sa", testing::MakeI64({1}, {1}))});
                 int f = g.Op("Flatten", {g.Op("Abs", {q})}, {{"axis", int64_t{1}}});
                 g.Output(g.Op("Exp", {g.Op("Identity", {f})}));
               }});
  // Ops that make shapes and ranges: Shape of an input, Range, ConstantOfShape added to an input.
  c.push_back(
      {"shapes_and_ranges", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
         int x = In(g, in, rng, DType::kF32, {3, 4});
         g.Output(g.Op("Shape", {x}));
         auto scalar = [&](const char* n, int64_t v) { return g.Const(n, testing::MakeI64({}, {v})); };
         g.Output(g.Op("Range", {scalar("start", 1), scalar("limit", 9), scalar("delta", 2)}));
         g.Output(g.Op("Add", {x, g.Op("ConstantOfShape", {g.Const("dims", testing::MakeI64({2}, {3, 4}))})}));
       }});
  c.push_back({"slice_negative_step",
               [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int x = In(g, in, rng, DType::kF32, {6, 10});
                 auto c1 = [&](const char* n, std::vector<int64_t> v) {
                   return g.Const(n, testing::MakeI64({static_cast<int64_t>(v.size())}, v));
                 };
                 g.Output(g.Op("Slice", {x, c1("s", {8, 1}), c1("e", {-11, 5}), c1("a", {1, 0}), c1("st", {-2, 2})}));
               }});
  c.push_back(
      {"concat_axis1", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
         int x = In(g, in, rng, DType::kF32, {3, 2, 5}), y = In(g, in, rng, DType::kF32, {3, 7, 5});
         int z = In(g, in, rng, DType::kF32, {3, 1, 5});
         g.Output(g.Op("Concat", {x, y, z}, {{"axis", int64_t{1}}}));
       }});
  // Concat is one launch per 32 inputs, copying in the widest unit sizes and addresses allow.
  c.push_back({"concat_many_odd_pieces",
               [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 std::vector<int> xs;
                 for (int i = 0; i < 40; ++i) xs.push_back(In(g, in, rng, DType::kF32, {5, 1 + i % 3}));
                 g.Output(g.Op("Concat", xs, {{"axis", int64_t{1}}}));
               }});
  c.push_back({"concat_aligned_rows",
               [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 std::vector<int> xs;
                 for (int i = 0; i < 5; ++i) xs.push_back(In(g, in, rng, DType::kF32, {9, 128}));
                 g.Output(g.Op("Concat", xs, {{"axis", int64_t{-1}}}));
               }});
  c.push_back({"concat_empty_piece_axis0",
               [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int x = In(g, in, rng, DType::kI64, {0, 5}, -9, 9), y = In(g, in, rng, DType::kI64, {3, 5}, -9, 9);
                 g.Output(g.Op("Concat", {x, y, In(g, in, rng, DType::kI64, {2, 5}, -9, 9)}, {{"axis", int64_t{0}}}));
               }});
  c.push_back(
      {"concat_bool_bytes", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
         int x = In(g, in, rng, DType::kBool, {3, 1}), y = In(g, in, rng, DType::kBool, {3, 2});
         g.Output(g.Op("Concat", {x, y}, {{"axis", int64_t{1}}}));
       }});
  c.push_back(
      {"concat_no_rows", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
         int x = In(g, in, rng, DType::kF32, {0, 3}), y = In(g, in, rng, DType::kF32, {0, 4});
         g.Output(g.Op("Concat", {x, y}, {{"axis", int64_t{1}}}));
       }});
  c.push_back(
      {"gather_axis0", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
         int table = g.Const("t", Random(DType::kF32, {50, 6}, rng));
         int idx = In(g, in, rng, DType::kI64, {4, 9}, -50, 50);
         g.Output(g.Op("Gather", {table, idx}));
       }});
  c.push_back(
      {"gather_axis1_int32", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
         int x = In(g, in, rng, DType::kF32, {3, 11, 2});
         int idx = In(g, in, rng, DType::kI32, {5}, -11, 11);
         g.Output(g.Op("Gather", {x, idx}, {{"axis", int64_t{1}}}));
       }});
  c.push_back({"gather_half_rows",
               [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int table = g.Const("t", Random(DType::kF16, {20, 3}, rng));
                 g.Output(g.Op("Gather", {table, In(g, in, rng, DType::kI64, {7}, 0, 20)}));
               },
               1e-3});
  c.push_back({"expand", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int x = In(g, in, rng, DType::kF32, {3, 1});
                 g.Output(g.Op("Expand", {x, g.Const("s", testing::MakeI64({3}, {2, 3, 6}))}));
               }});
  c.push_back({"tile", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int x = In(g, in, rng, DType::kI64, {2, 3}, -9, 9);
                 g.Output(g.Op("Tile", {x, g.Const("r", testing::MakeI64({2}, {3, 2}))}));
               }});
  c.push_back({"where", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int cnd = In(g, in, rng, DType::kBool, {4, 1});
                 g.Output(g.Op("Where", {cnd, In(g, in, rng, DType::kF32, {4, 5}), In(g, in, rng, DType::kF32, {5})}));
               }});
  c.push_back({"clip", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int x = In(g, in, rng, DType::kF32, {100});
                 g.Output(g.Op("Clip", {x, g.Const("lo", testing::MakeF32({}, {-0.5f})),
                                        g.Const("hi", testing::MakeF32({}, {0.7f}))}));
               }});
  c.push_back(
      {"softmax_last", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
         g.Output(g.Op("Softmax", {In(g, in, rng, DType::kF32, {7, 1000}, -20, 20)}));
       }});
  c.push_back(
      {"softmax_middle", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
         g.Output(g.Op("Softmax", {In(g, in, rng, DType::kF32, {3, 9, 4})}, {{"axis", int64_t{1}}}));
       }});
  c.push_back({"layer_norm", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int x = In(g, in, rng, DType::kF32, {13, 96});
                 g.Output(g.Op("LayerNormalization", {x, g.Const("s", Random(DType::kF32, {96}, rng)),
                                                      g.Const("b", Random(DType::kF32, {96}, rng))}));
               }});
  c.push_back(
      {"layer_norm_two_axes_broadcast",
       [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
         int x = In(g, in, rng, DType::kF32, {5, 3, 8});
         g.Output(g.Op("LayerNormalization", {x, g.Const("s", Random(DType::kF32, {8}, rng))}, {{"axis", int64_t{1}}}));
       }});
  c.push_back({"einsum", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int x = In(g, in, rng, DType::kF32, {2, 5, 7}), y = In(g, in, rng, DType::kF32, {2, 7, 3});
                 g.Output(g.Op("Einsum", {x, y}, {{"equation", std::string("bij,bjk->bik")}}));
               }});
  for (auto [name, sa, sb, sc] : {std::tuple{"muladd_same_shape", S{64, 36}, S{64, 36}, S{64, 36}},
                                  std::tuple{"muladd_odd_size", S{7, 5}, S{7, 5}, S{7, 5}},
                                  std::tuple{"muladd_broadcast", S{3, 1, 5}, S{4, 5}, S{5}}}) {
    // Init-captures: clang 14 cannot capture structured bindings.
    c.push_back({name, [sa = sa, sb = sb, sc = sc](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&,
                                                   std::mt19937_64& rng) {
                   int a = In(g, in, rng, DType::kF32, sa), b = In(g, in, rng, DType::kF32, sb),
                       x = In(g, in, rng, DType::kF32, sc);
                   g.Output(g.Op("MulAdd", {a, b, x}));
                 }});
  }
  // SoftmaxAttention (model/ops/softmax_attention.h): BST's encoder (4 heads of 16, 50
  // positions, a mask dropping a tail) and a pooling row per candidate over its user's sequence.
  c.push_back({"softmax_attention_heads",
               [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int q = In(g, in, rng, DType::kF32, {2, 50, 64}), k = In(g, in, rng, DType::kF32, {2, 50, 64});
                 int v = In(g, in, rng, DType::kF32, {2, 50, 64}), m = In(g, in, rng, DType::kBool, {2, 50});
                 g.Output(g.Op("SoftmaxAttention", {q, k, v, m}, {{"heads", int64_t{4}}, {"scale", 0.25f}}));
               }});
  c.push_back(
      {"softmax_attention_pooling",
       [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
         int q = In(g, in, rng, DType::kF32, {9, 64}), k = In(g, in, rng, DType::kF32, {3, 33, 64});
         int m = In(g, in, rng, DType::kBool, {3, 33}), rows = In(g, in, rng, DType::kI64, {9}, 0, 3);
         g.Output(g.Op("SoftmaxAttention", {q, k, k, m, rows}, {{"scale", 0.125f}, {"mask_keeps", int64_t{1}}}));
       }});
  // DotInteraction (model/ops/dot_interaction.h): DLRM's 27 fields of 128 (its strict lower
  // triangle after a dense part), and a few odd fields with repeated pairs and the diagonal.
  c.push_back({"dot_interaction_dlrm",
               [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 std::vector<int64_t> pairs;
                 for (int64_t i = 0; i < 27; ++i) {
                   for (int64_t j = 0; j < i; ++j) pairs.insert(pairs.end(), {i, j});
                 }
                 int t = In(g, in, rng, DType::kF32, {9, 27, 128}), dense = In(g, in, rng, DType::kF32, {9, 128});
                 int p = g.Const("pairs", testing::MakeI64({static_cast<int64_t>(pairs.size() / 2), 2}, pairs));
                 g.Output(g.Op("DotInteraction", {t, p, dense}));
               }});
  c.push_back({"dot_interaction_odd",
               [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 int t = In(g, in, rng, DType::kF32, {6, 5, 3});
                 int p = g.Const("pairs", testing::MakeI64({5, 2}, {4, 4, 0, 3, 3, 0, 2, 2, 0, 3}));
                 g.Output(g.Op("DotInteraction", {t, p}));
               }});
  // KeyedRows (model/ops/keyed_rows.h), two parts in one launch: keys found, keys unknown (the
  // default row) and, with bag=1, negative ids kept as empty slots; INT32 ids without bag.
  c.push_back({"keyed_rows", [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>&, std::mt19937_64& rng) {
                 std::vector<int64_t> keys(300);
                 for (int64_t& k : keys) k = static_cast<int64_t>(rng() >> 1);  // distinct, almost surely
                 auto index = BuildKeyIndex(keys);
                 std::vector<int64_t> ids;
                 for (int i = 0; i < 1000; ++i) {
                   ids.push_back(i % 5 == 0   ? static_cast<int64_t>(rng() >> 1)
                                 : i % 7 == 0 ? -1
                                              : keys[static_cast<size_t>(rng() % keys.size())]);
                 }
                 in.push_back(testing::MakeI64({10, 100}, ids));
                 Tensor narrow = Tensor::Empty(DType::kI32, {40});
                 for (int i = 0; i < 40; ++i) narrow.data<int32_t>()[i] = i % 3 ? -i : static_cast<int32_t>(keys[0]);
                 in.push_back(narrow);
                 int k = g.Const("index", *index);
                 Node& node = g.graph().nodes.emplace_back();
                 node.op = "KeyedRows";
                 node.name = "keyed_rows";
                 node.inputs = {g.Input("ids", DType::kI64, {10, 100}), k, g.Input("narrow", DType::kI32, {40}), k};
                 for (const char* out : {"rows", "narrow_rows"}) {
                   node.outputs.push_back(g.graph().AddValue({out, DType::kI64, {}, false}));
                 }
                 keyed_rows::SetParts(node, {{300, true, 0, "t"}, {300, false, 1, "t"}});
                 for (int out : node.outputs) g.Output(out);
               }});
  c.push_back(HashStringsCase("hash_strings_fingerprint64", "fingerprint64", i64));
  c.push_back(HashStringsCase("hash_strings_xxhash64_i32", "xxhash64", DType::kI32));
  c.push_back(HashStringsCase("hash_strings_murmur3_32", "murmur3_32", i64));
  c.push_back({"ragged_to_padded",
               [](GraphBuilder& g, std::vector<Tensor>& in, std::vector<int64_t>& ragged, std::mt19937_64&) {
                 in.push_back(testing::MakeI64({6}, {4, 5, 6, 7, 8, 9}));
                 in.push_back(testing::MakeI64({5}, {0, 2, 2, 6, 6}));
                 int v = g.Input("v", DType::kI64, {6}), o = g.Input("o", DType::kI64, {5});
                 g.Output(g.Op("RaggedToPadded", {v, o}, {{"ragged_index", int64_t{0}}}));
                 ragged.push_back(4);
               }});
  return c;
}

class CudaOpTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOpTest, MatchesCpuOnRandomInputs) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const OpCase& c = GetParam();
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    GraphBuilder g;
    std::vector<Tensor> inputs;
    std::vector<int64_t> ragged;
    c.build(g, inputs, ragged, rng);
    auto want = testing::RunGraph(g.graph(), inputs, ragged, CpuBackend());
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = testing::RunGraph(g.graph(), inputs, ragged, *cuda);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      const Tensor &x = (*got)[i], &y = (*want)[i];
      ASSERT_EQ(x.dtype(), y.dtype());
      ASSERT_EQ(x.shape(), y.shape());
      double err = testing::RelativeError(x, y);
      bool all_zero = true;
      for (int64_t e = 0; e < y.size(); ++e) all_zero = all_zero && y.ScalarAsDouble(e) == 0.0;
      if (all_zero) {
        for (int64_t e = 0; e < x.size(); ++e) ASSERT_EQ(x.ScalarAsDouble(e), 0.0) << c.name << " element " << e;
      } else {
        EXPECT_LE(err, c.tolerance) << c.name << " seed " << seed;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaOpTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return std::string(info.param.name); });

#if RANKD_HAVE_CUDA
// Every op the CUDA backend has a kernel for is in some case above, so each kernel is compared with
// the CPU's on random inputs. The table is built without a device: this runs in CI too.
TEST(CudaBackend, EveryKernelHasACrossBackendCase) {
  std::set<std::string> covered;
  for (const OpCase& c : Cases()) {
    std::mt19937_64 rng(1);
    GraphBuilder g;
    std::vector<Tensor> inputs;
    std::vector<int64_t> ragged;
    c.build(g, inputs, ragged, rng);
    for (const Node& n : g.graph().nodes) covered.insert(n.op);
  }
  covered.insert("FusedElementwise");  // made by a pass: elementwise_fusion_test.cc compares it on the GPU
  covered.insert("TargetAttention");   // likewise: attention_fusion_test.cc
  std::string missing;
  for (const auto& [op, kernel] : CudaKernels()) {
    if (!covered.count(op)) missing += " " + op;
  }
  EXPECT_TRUE(missing.empty()) << "CUDA kernels with no case in Cases():" << missing;
}

// Out of device memory is worth a retry (503); an error that poisons the context is named as such
// (and, noted, fails the backend's health: tests/gpu_faults_test.py); others are internal. No
// device needed: only the mapping is checked, nothing is noted.
TEST(CudaBackend, ErrorsMapToWhatTheClientCanDo) {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorIllegalInstruction,
                        cudaErrorMisalignedAddress, cudaErrorAssert, cudaErrorECCUncorrectable}) {
    EXPECT_TRUE(cuda::IsStickyError(e)) << cudaGetErrorName(e);
  }
  for (cudaError_t e : {cudaSuccess, cudaErrorMemoryAllocation, cudaErrorInvalidValue, cudaErrorLaunchOutOfResources,
                        cudaErrorStreamCaptureInvalidated, cudaErrorNoDevice}) {
    EXPECT_FALSE(cuda::IsStickyError(e)) << cudaGetErrorName(e);
  }
  Status oom = cuda::Check(cudaErrorMemoryAllocation, "cudaMalloc");
  EXPECT_EQ(oom.code(), StatusCode::kUnavailable);
  EXPECT_NE(oom.message().find("out of device memory"), std::string::npos);
  Status bad = cuda::Check(cudaErrorInvalidValue, "cudaMemcpy");
  EXPECT_EQ(bad.code(), StatusCode::kInternal);
  EXPECT_NE(bad.message().find("cudaMemcpy"), std::string::npos);
}
#endif

// A concatenation of more than 16,384 bags (the large launch, a lane group per bag) with one id
// past its table, in the last bag: the run fails naming it, and with that id fixed the
// concatenation scores as the CPU's.
TEST(CudaBackend, IdOutOfRangeInALargeConcatenationFailsThatRunOnly) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(12);
  GraphBuilder g;
  std::vector<Tensor> in;
  std::vector<int> ins = BagInputs(g, in, rng, "0", 700, 128, 9000, 6, 0.1, 0.1, DType::kBF16, false);
  std::vector<int> more = BagInputs(g, in, rng, "1", 90, 32, 9000, 3, 0.1, 0.1, DType::kF32, false);
  ins.insert(ins.end(), more.begin(), more.end());
  g.Output(
      g.Op("ConcatEmbeddingBags", ins, {{"parts", std::vector<int64_t>{3, 3}}, {"modes", std::vector<int64_t>{0, 1}}}));
  Tensor& values = in[2];  // the second part's ids
  ASSERT_GT(values.size(), 0);
  const int64_t good = values.data<int64_t>()[values.size() - 1];
  values.data<int64_t>()[values.size() - 1] = 90;
  auto failed = testing::RunGraph(g.graph(), in, {}, *cuda);
  ASSERT_FALSE(failed.ok()) << "an id past the table was read";
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(failed.status().message().find("out of range"), std::string::npos) << failed.status().ToString();
  values.data<int64_t>()[values.size() - 1] = good;
  auto got = testing::RunGraph(g.graph(), in, {}, *cuda);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto want = testing::RunGraph(g.graph(), in);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_LE(testing::RelativeError((*got)[0], (*want)[0]), 1e-3);
}

TEST(CudaBackend, IdOutOfRangeFailsThatRunOnly) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  GraphBuilder g;
  int table = g.Const("t", testing::MakeF32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  int ids = g.Input("ids", DType::kI64, {3});
  int offsets = g.Input("offsets", DType::kI64, {2});
  g.Output(g.Op("EmbeddingBag", {table, ids, offsets}));
  std::vector<TensorMeta> metas{{DType::kI64, {3}, nullptr}, {DType::kI64, {2}, nullptr}};
  PlanOptions options;
  options.backend = cuda;
  auto plan = Plan::Build(g.graph(), metas, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto resources = cuda->PrepareModel(g.graph(), Precision::kFp32);
  ASSERT_TRUE(resources.ok());
  auto executor = NewExecutor(*cuda, *resources);
  ASSERT_TRUE(executor.ok());
  // The ids go to the device in 32 bits (compile/narrowable_ids.h): ids beyond INT32's range must still be
  // out of range, never wrapped into the table.
  for (int64_t id : {int64_t{4}, (int64_t{1} << 32) + 1, int64_t{INT32_MAX} + 1, int64_t{1} << 62}) {
    std::vector<Tensor> bad{testing::MakeI64({3}, {0, id, 1}), testing::MakeI64({2}, {0, 3})};
    auto failed = (*executor)->Run(**plan, bad);
    ASSERT_FALSE(failed.ok()) << "id " << id << " was read as a row";
    EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(failed.status().message().find("out of range"), std::string::npos) << failed.status().ToString();
  }
  // The same executor then scores a good request correctly; a negative id beyond INT32's range
  // is an empty slot like any negative id.
  std::vector<Tensor> good{testing::MakeI64({3}, {0, 3, -(int64_t{1} << 40)}), testing::MakeI64({2}, {0, 3})};
  auto ok = (*executor)->Run(**plan, good);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].data<float>()[0], 8.0f);
  EXPECT_EQ((*ok)[0].data<float>()[1], 10.0f);
}

// A ragged input's ids may be shorter than the plan's (Executor::FillsRaggedTails): the slots
// after them read -1 whatever an earlier run of this or another plan left in the staging buffer,
// replayed captures included; only such inputs may be short, and none may be longer.
TEST(CudaBackend, ShortIdsReadAsMinusOneAfterThem) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  GraphBuilder g;
  int ids = g.Input("ids", DType::kI64, {-1});
  int x = g.Input("x", DType::kF32, {2});
  g.Output(g.Op("Neg", {ids}));  // shows every slot, the tail too
  g.Output(g.Op("Neg", {x}));
  auto resources = cuda->PrepareModel(g.graph(), Precision::kFp32);
  ASSERT_TRUE(resources.ok());
  auto executor = NewExecutor(*cuda, *resources);
  ASSERT_TRUE(executor.ok());
  ASSERT_TRUE((*executor)->FillsRaggedTails());
  auto plan_for = [&](int64_t slots) {
    PlanOptions options;
    options.backend = cuda;
    auto plan = Plan::Build(g.graph(), {{DType::kI64, {slots}, nullptr}, {DType::kF32, {2}, nullptr}}, options);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return std::move(*plan);
  };
  std::shared_ptr<const Plan> eight = plan_for(8), sixteen = plan_for(16);
  // Runs `plan` on ids 10, 11, ... (`count` of them) and expects their negations, then 1 per slot.
  auto expect_run = [&](const Plan& plan, int64_t count, int64_t slots) {
    std::vector<int64_t> given(static_cast<size_t>(count)), want(static_cast<size_t>(slots), 1);
    for (int64_t i = 0; i < count; ++i) {
      given[static_cast<size_t>(i)] = 10 + i;
      want[static_cast<size_t>(i)] = -(10 + i);
    }
    std::vector<Tensor> in{testing::MakeI64({count}, given), testing::MakeF32({2}, {1, 2})};
    auto out = (*executor)->Run(plan, in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<int64_t> got((*out)[0].data<int64_t>(), (*out)[0].data<int64_t>() + (*out)[0].size());
    EXPECT_EQ(got, want) << count << " ids in " << slots << " slots";
  };
  expect_run(*eight, 8, 8);
  expect_run(*eight, 3, 8);                        // the tail filled from 3
  expect_run(*eight, 6, 8);                        // ids over part of the old tail
  expect_run(*eight, 2, 8);                        // the tail filled from 2 up to 6 only
  expect_run(*sixteen, 16, 16);                    // another plan over the same staging bytes
  expect_run(*eight, 1, 8);                        // its leftovers are not taken for -1
  ASSERT_TRUE((*executor)->Capture(*eight).ok());  // staged zeros for its warm-up run
  ASSERT_TRUE((*executor)->Captured(*eight));
  expect_run(*eight, 4, 8);
  expect_run(*eight, 0, 8);

  auto refused = [&](std::vector<Tensor> in, const std::string& says) {
    auto out = (*executor)->Run(*eight, in);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(says), std::string::npos) << out.status().ToString();
  };
  refused({testing::MakeI64({9}, std::vector<int64_t>(9, 1)), testing::MakeF32({2}, {1, 2})}, "has room for");
  refused({testing::MakeI64({8}, std::vector<int64_t>(8, 1)), testing::MakeF32({1}, {1})}, "not a ragged input's ids");
  refused({testing::MakeI64({8}, std::vector<int64_t>(8, 1))}, "takes 2 inputs");
  expect_run(*eight, 5, 8);  // and the executor still runs
}

// Inputs of tens of MB are packed and sent in chunks while the next chunk is packed
// (cuda_executor.cc): every byte must arrive, in every input, whatever the chunk edges; a small
// run between two large ones on the same executor still sends its inputs in one copy.
TEST(CudaBackend, LargeInputsSentInChunksArriveWhole) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  GraphBuilder g;
  int a = g.Input("a", DType::kF32, {-1});
  int b = g.Input("b", DType::kF32, {-1});
  int c = g.Input("c", DType::kI64, {-1});
  g.Output(g.Op("Add", {a, b}));
  g.Output(g.Op("Neg", {c}));
  auto resources = cuda->PrepareModel(g.graph(), Precision::kFp32);
  ASSERT_TRUE(resources.ok());
  auto executor = NewExecutor(*cuda, *resources);
  ASSERT_TRUE(executor.ok());
  std::mt19937_64 rng(8);
  for (int64_t n : {int64_t{3'000'017}, int64_t{5}, int64_t{2'100'001}}) {  // 36 MB, bytes, 25 MB of inputs
    std::vector<Tensor> in{testing::RandomF32({n}, rng), testing::RandomF32({n}, rng), Tensor::Zeros(DType::kI64, {n})};
    for (int64_t i = 0; i < n; ++i) in[2].data<int64_t>()[i] = static_cast<int64_t>(rng() >> 20);
    PlanOptions options;
    options.backend = cuda;
    auto plan = Plan::Build(
        g.graph(), {{DType::kF32, {n}, nullptr}, {DType::kF32, {n}, nullptr}, {DType::kI64, {n}, nullptr}}, options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    auto got = (*executor)->Run(**plan, in);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    auto want = testing::RunGraph(g.graph(), in);
    ASSERT_TRUE(want.ok());
    for (size_t o = 0; o < 2; ++o) {
      ASSERT_EQ((*got)[o].bytes(), (*want)[o].bytes());
      EXPECT_EQ(std::memcmp((*got)[o].raw(), (*want)[o].raw(), (*want)[o].bytes()), 0) << "n " << n << " output " << o;
    }
  }
}

// Every zoo model: the reference requests and random ones with edge-case lengths, GPU vs CPU.
class CudaZooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaZooTest, MatchesCpu) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/" + GetParam());
  ModelOptions gpu_options;
  gpu_options.backend = cuda;
  auto cpu = Model::Load(dir, -1);
  auto gpu = Model::Load(dir, -1, gpu_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  std::vector<InferRequest> requests;
  std::ifstream file(testing::SourcePath("tests/data/zoo/" + GetParam() + ".requests.jsonl"));
  for (std::string line; std::getline(file, line);) {
    auto r = ParseInferRequestJson(line);
    ASSERT_TRUE(r.ok());
    requests.push_back(*r);
  }
  // Random requests: ids across each table, ragged lengths including 0 and the longest allowed.
  std::mt19937_64 rng(7);
  for (int64_t rows : {1, 3, 64}) {
    InferRequest r = (*cpu)->ExampleRequest(rows);
    for (InferInput& in : r.inputs) {
      const InputConfig* cfg = (*cpu)->config().FindInput(in.name);
      if (cfg->ragged) {
        std::vector<int64_t> lengths;
        int64_t total = 0;
        for (size_t i = 0; i < in.lengths.size(); ++i) {
          int64_t len = i == 0   ? 0
                        : i == 1 ? std::min<int64_t>(cfg->max_length, 300)
                                 : static_cast<int64_t>(rng() % 20);
          lengths.push_back(len);
          total += len;
        }
        in.lengths = lengths;
        in.data = Random(in.data.dtype(), {total}, rng, 0, 40);
      } else {
        in.data = Random(in.data.dtype(), in.data.shape(), rng, 0, 40);
      }
    }
    requests.push_back(r);
  }
  for (size_t q = 0; q < requests.size(); ++q) {
    auto want = (*cpu)->Infer(requests[q]);
    auto got = (*gpu)->Infer(requests[q]);
    ASSERT_EQ(want.ok(), got.ok()) << "request " << q << ": " << want.status().ToString() << " / "
                                   << got.status().ToString();
    if (!want.ok()) continue;
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_LE(testing::RelativeError((*got)[i].data, (*want)[i].data), 1e-5) << GetParam() << " request " << q;
    }
  }
}

// W4s (mmoe_strings) with its strings hashed on the device: scores as the CPU's, which hashes with
// Debian's libraries, for strings of every length class, at sizes that pad to a bucket and not;
// the strings' bytes are copied into the pinned pool, which the GPU reads in place.
TEST(CudaBackend, StringsHashedOnTheDeviceScoreAsOnTheCpu) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/mmoe_strings");
  ModelOptions gpu_options;
  gpu_options.backend = cuda;
  auto cpu = Model::Load(dir, -1);
  auto gpu = Model::Load(dir, -1, gpu_options);
  ASSERT_TRUE(cpu.ok() && gpu.ok()) << gpu.status().ToString();
  std::mt19937_64 rng(31);
  for (int64_t rows : {1, 7, 64, 300}) {
    InferRequest r = (*cpu)->ExampleRequest(rows);
    for (InferInput& in : r.inputs) {
      if (in.is_bytes()) {
        PackedStrings s;
        s.shape = in.strings.shape;
        for (int64_t i = 0; i < NumElements(s.shape); ++i) {
          std::string v(rng() % 90, ' ');
          for (char& ch : v) ch = static_cast<char>(rng());
          s.Append(v);
        }
        in.strings = std::move(s);
      } else if (in.data.dtype() == DType::kI64) {
        for (int64_t i = 0; i < in.data.size(); ++i) in.data.data<int64_t>()[i] = static_cast<int64_t>(rng() % 100);
      } else {
        in.data = Random(in.data.dtype(), in.data.shape(), rng);
      }
    }
    if (rows == 1) {  // the pinned pool serves the strings' copy, so the device hashes them
      const InputConfig* cfg = (*gpu)->config().FindInput("categories");
      ASSERT_TRUE(cfg && cfg->HashedByBackend());
      RequestTensorScope scope;
      Tensor bytes;
      auto records = StringRecords(*cfg, r.inputs[1], true, bytes);
      ASSERT_TRUE(records.ok());
      ASSERT_TRUE(bytes.defined());
      EXPECT_EQ(bytes.location().kind, MemoryKind::kPinned);
    }
    auto want = (*cpu)->Infer(r);
    auto got = (*gpu)->Infer(r);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << " / " << got.status().ToString();
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_LE(testing::RelativeError((*got)[i].data, (*want)[i].data), 1e-5) << rows << " rows, output " << i;
    }
  }
}

// Without the fusion passes the GPU scores as PyTorch too, and puts more kernels on the device.
TEST_P(CudaZooTest, UnfusedScoresTheSameWithMoreLaunches) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/" + GetParam());
  ModelOptions fused_options, unfused_options;
  fused_options.backend = unfused_options.backend = cuda;
  unfused_options.fusion = false;
  auto fused = Model::Load(dir, -1, fused_options);
  auto unfused = Model::Load(dir, -1, unfused_options);
  ASSERT_TRUE(fused.ok()) << fused.status().ToString();
  ASSERT_TRUE(unfused.ok()) << unfused.status().ToString();
  testing::ExpectZooScores(**unfused, GetParam(), 1e-5);
  InferRequest r = (*fused)->ExampleRequest(8, 3);
  auto fused_plan = (*fused)->PlanForRequest(r);
  auto unfused_plan = (*unfused)->PlanForRequest(r);
  ASSERT_TRUE(fused_plan.ok() && unfused_plan.ok());
  auto a = (*fused)->CountLaunches(**fused_plan);
  auto b = (*unfused)->CountLaunches(**unfused_plan);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_GT(a->kernels, 0);
  EXPECT_GE(a->copies, 1);  // one input copy in (outputs no step reads come back without one)
  EXPECT_EQ(a->other, 0);
  const LoadReport& report = (*fused)->load_report();
  if (report.fused_embedding_bags + report.fused_embedding_concats + report.fused_epilogues > 0) {
    EXPECT_LT(a->kernels, b->kernels);
  }
  // Counting does not capture: the plan still runs (and scores) as before.
  EXPECT_TRUE((*fused)->Infer(r).ok());
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudaZooTest,
                         ::testing::Values("dlrm_dcnv2", "dlrm", "din", "bst", "bst_opset13", "mmoe"));

// Reduced-precision products stay within their precision's tolerance of the fp32 CPU scores.
// The products again with bf16 operands (weights rounded once at load, other operands rounded
// per product): within bf16's tolerance of the CPU, and not exact (the rounding is applied).
TEST(CudaBackend, ProductsWithBf16OperandsStayWithinTheirTolerance) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  int products = 0;
  for (const OpCase& c : Cases()) {
    const std::string name = c.name;
    if (name.rfind("matmul", 0) != 0 && name.rfind("gemm", 0) != 0 && name.rfind("einsum", 0) != 0) continue;
    ++products;
    std::mt19937_64 rng(9);
    GraphBuilder g;
    std::vector<Tensor> inputs;
    std::vector<int64_t> ragged;
    c.build(g, inputs, ragged, rng);
    auto want = testing::RunGraph(g.graph(), inputs, ragged, CpuBackend());
    auto got = testing::RunGraph(g.graph(), inputs, ragged, *cuda, Precision::kBf16);
    ASSERT_TRUE(want.ok() && got.ok()) << name << ": " << got.status().ToString();
    double err = testing::RelativeError((*got)[0], (*want)[0]);
    EXPECT_LE(err, 3e-2) << name;
    EXPECT_GT(err, 0.0) << name << " rounds like fp32: are the operands rounded?";
  }
  EXPECT_GT(products, 10);
}

TEST(CudaBackend, ReducedPrecisionsStayWithinTheirTolerance) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (const char* name : {"dlrm_dcnv2", "din", "bst", "mmoe"}) {
    const std::string dir = testing::SourcePath(std::string("models/zoo/") + name);
    auto cpu = Model::Load(dir, -1);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    InferRequest request = (*cpu)->ExampleRequest(64);
    std::mt19937_64 rng(3);
    for (InferInput& in : request.inputs) in.data = Random(in.data.dtype(), in.data.shape(), rng, 0, 10);
    auto want = (*cpu)->Infer(request);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (auto [precision, tolerance] :
         {std::pair{"tf32", 5e-3}, std::pair{"bf16", 3e-2}, std::pair{"bf16-activations", 3e-2}}) {
      ModelOptions options;
      options.backend = cuda;
      options.precision = precision;
      auto gpu = Model::Load(dir, -1, options);
      ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
      auto got = (*gpu)->Infer(request);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      double err = testing::RelativeError((*got)[0].data, (*want)[0].data);
      EXPECT_LE(err, tolerance) << name << " " << precision;
      EXPECT_GT(err, 0.0) << name << " " << precision << " rounds like fp32: is the precision applied?";
    }
  }
}

TEST(CudaBackend, ConcurrentRequestsOnPooledExecutors) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  ModelOptions options;
  options.backend = cuda;
  options.executors = 3;
  options.batching = 0;  // each request on an executor of its own, scored exactly as alone
  auto model = Model::Load(testing::SourcePath("models/zoo/din"), -1, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  InferRequest request = (*model)->ExampleRequest(16);
  auto want = (*model)->Infer(request);
  ASSERT_TRUE(want.ok());
  // Each executor's thread waiting for its own runs, then all of them asleep while the device's
  // poller queries their events: every answer the same.
  for (bool poller : {false, true}) {
#if RANKD_HAVE_CUDA
    cuda::SetDeviceWait(poller ? cuda::DeviceWait::kPoller : cuda::DeviceWait::kNap);
#endif
    std::vector<std::thread> threads;
    std::atomic<int> mismatches{0}, failures{0};
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 50; ++i) {
          auto got = (*model)->Infer(request);
          if (!got.ok())
            ++failures;
          else if (testing::RelativeError((*got)[0].data, (*want)[0].data) != 0.0)
            ++mismatches;
        }
      });
    }
    for (auto& t : threads) t.join();
    const char* mode = poller ? "poller" : "nap";
    EXPECT_EQ(failures.load(), 0) << mode;
    EXPECT_EQ(mismatches.load(), 0) << mode;
  }
#if RANKD_HAVE_CUDA
  cuda::SetDeviceWait(cuda::DeviceWait::kPoller);  // the default
#endif
}

}  // namespace
}  // namespace rankd
