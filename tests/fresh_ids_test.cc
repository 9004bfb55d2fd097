// `rankd bench engine --fresh-ids` (tools/fresh_ids.h): the request inputs a model's lookups read
// are found with their tables' rows, and variants of a request keep everything but those ids,
// drawn anew within the tables.
#include "tools/fresh_ids.h"

#include <gtest/gtest.h>

#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

TEST(FreshIds, VariantsDrawNewIdsWithinTheTablesAndKeepTheRest) {
  auto model = Model::Load(testing::SourcePath("models/zoo/dlrm_dcnv2"), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::vector<LookupInput> lookups = FindLookupInputs(**model);
  ASSERT_EQ(lookups.size(), 26u);  // sparse_0 ... sparse_25, ragged: found through sparse_i.values
  for (const LookupInput& l : lookups) {
    EXPECT_EQ(l.input.rfind("sparse_", 0), 0u) << l.input;
    EXPECT_EQ(l.rows, 1000) << l.input;
  }
  const std::vector<InferRequest> requests = testing::ZooRequests("dlrm_dcnv2");
  const std::vector<InferRequest> variants = FreshIdVariants(requests, lookups, 3, 1.05, 7);
  ASSERT_EQ(variants.size(), 3 * requests.size());
  int64_t changed = 0, ids = 0;
  for (size_t v = 0; v < variants.size(); ++v) {
    const InferRequest& from = requests[v % requests.size()];
    ASSERT_EQ(variants[v].inputs.size(), from.inputs.size());
    for (size_t i = 0; i < from.inputs.size(); ++i) {
      const InferInput &got = variants[v].inputs[i], &was = from.inputs[i];
      ASSERT_EQ(got.name, was.name);
      ASSERT_EQ(got.data.shape(), was.data.shape()) << got.name;
      EXPECT_EQ(got.lengths, was.lengths) << got.name;
      if (got.name == "dense") {
        EXPECT_EQ(testing::RelativeError(got.data, was.data), 0) << "dense inputs are kept";
        continue;
      }
      ASSERT_EQ(got.data.dtype(), DType::kI64) << got.name;
      for (int64_t k = 0; k < got.data.size(); ++k) {
        const int64_t id = got.data.data<int64_t>()[k], old = was.data.data<int64_t>()[k];
        if (old < 0) {
          EXPECT_EQ(id, old) << got.name << ": an empty slot stays empty";
          continue;
        }
        EXPECT_GE(id, 0) << got.name;
        EXPECT_LT(id, 1000) << got.name;
        ++ids;
        changed += id != old;
      }
    }
    auto scored = (*model)->Infer(variants[v]);
    EXPECT_TRUE(scored.ok()) << scored.status().ToString();
  }
  EXPECT_GT(changed, ids / 2) << "most ids are drawn anew";
  // The file's requests are untouched, and the same seed draws the same variants.
  const std::vector<InferRequest> again = FreshIdVariants(requests, lookups, 3, 1.05, 7);
  for (size_t v = 0; v < variants.size(); ++v) {
    for (size_t i = 0; i < variants[v].inputs.size(); ++i) {
      EXPECT_EQ(testing::RelativeError(again[v].inputs[i].data, variants[v].inputs[i].data), 0);
    }
  }
  EXPECT_EQ(testing::RelativeError(requests[0].inputs[1].data, testing::ZooRequests("dlrm_dcnv2")[0].inputs[1].data),
            0);
}

}  // namespace
}  // namespace rankd
