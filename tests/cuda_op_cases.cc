// The cross-backend op cases (cuda_op_cases.h): elementwise, casts, products, reductions, shape
// ops, gathers, string hashing and the rest, and the list of every case.
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#if RANKD_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#include "cuda_op_cases.h"
#include "model/key_index.h"
#include "model/ops/hash_strings.h"
#include "model/ops/keyed_rows.h"

namespace rankd::testing {
namespace {

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

}  // namespace

Tensor Random(DType dtype, Shape shape, std::mt19937_64& rng, double lo, double hi) {
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

std::vector<OpCase> CudaOpCases() {
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

}  // namespace rankd::testing
