// The cross-backend op cases of the CUDA tests: each a small graph and its inputs, built fresh from a
// seeded generator, that the CUDA backend must score as the CPU backend does (cuda_backend_test.cc).
// cuda_op_cases.cc holds the cases and the builders of most; cuda_bag_cases.cc those of the
// embedding bags and their concatenations.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "rankd/tensor.h"
#include "test_util.h"

namespace rankd::testing {

// One op case: a graph and its inputs, built fresh from a seeded generator.
struct OpCase {
  const char* name;
  std::function<void(GraphBuilder&, std::vector<Tensor>&, std::vector<int64_t>&, std::mt19937_64&)> build;
  double tolerance = 1e-5;
};

// Every case, in a fixed order (the test's parameters).
std::vector<OpCase> CudaOpCases();

// A tensor of `shape` with values drawn uniformly from [lo, hi) (integers: their floor).
Tensor Random(DType dtype, Shape shape, std::mt19937_64& rng, double lo = -2, double hi = 2);

// The inputs of a bag (table, ids or values + offsets) with empty bags and -1 slots at the given
// rates; `tag` names its graph inputs.
std::vector<int> BagInputs(GraphBuilder& g, std::vector<Tensor>& in, std::mt19937_64& rng, const std::string& tag,
                           int64_t rows, int64_t dim, int64_t bags, int64_t max_len, double empty, double minus_one,
                           DType table_dtype, bool padded);

// The embedding bags' cases (cuda_bag_cases.cc, where each is described).
OpCase Bag(const char* name, int64_t rows, int64_t dim, int64_t bags, int64_t max_len, double empty, double minus_one,
           const char* mode, DType table_dtype, bool padded);
OpCase WeightedBag(const char* name, int64_t rows, int64_t dim, int64_t bags, int64_t max_len, double empty,
                   const char* mode, DType table_dtype);
OpCase BagsConcatWeighted(const char* name, int64_t rows);
OpCase BagsConcat(const char* name, int parts, int64_t bags);
OpCase BagsConcatLong(const char* name, int64_t rows);
OpCase BagsConcatShort(const char* name, int64_t rows);
OpCase BagsConcatAllEmpty();

}  // namespace rankd::testing
