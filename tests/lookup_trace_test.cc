// The lookups a request makes (embedding/lookup_trace.h), as a cache and `rankd inspect --requests`
// see them.
#include "embedding/lookup_trace.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "frontend/kserve_json.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

// The lookups a request makes, as a cache would see them: every id of W1's 26 sparse inputs, each
// keyed with its table; DIN's row Gathers too, each id within its table.
TEST(LookupTrace, RecordsEveryIdEachLookupReads) {
  for (const std::string name : {"dlrm_dcnv2", "din"}) {
    auto model = Model::Load(testing::SourcePath("models/zoo/" + name), -1);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    std::ifstream file(testing::SourcePath("tests/data/zoo/" + name + ".requests.jsonl"));
    std::string line;
    ASSERT_TRUE(std::getline(file, line));
    auto request = ParseInferRequestJson(line);
    ASSERT_TRUE(request.ok());
    auto prepared = (*model)->PrepareForInspection(*request);
    ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
    std::vector<uint64_t> trace;
    AppendLookups((*model)->graph(), (*model)->tables(), prepared->inputs, trace);
    ASSERT_FALSE(trace.empty()) << name;
    const std::vector<TableInfo>& tables = (*model)->tables();
    std::set<size_t> seen;
    for (uint64_t key : trace) {
      const size_t t = key >> 48;
      ASSERT_LT(t, tables.size());
      ASSERT_LT(static_cast<int64_t>(key & ((uint64_t{1} << 48) - 1)), tables[t].shape[0]);
      seen.insert(t);
    }
    if (name == "dlrm_dcnv2") {
      int64_t ids = 0;
      size_t inputs_with_ids = 0;  // each sparse input feeds its own table
      for (const InferInput& in : request->inputs) {
        if (in.data.dtype() != DType::kI64) continue;
        int64_t here = 0;
        for (int64_t i = 0; i < in.data.size(); ++i) here += in.data.data<int64_t>()[i] >= 0;
        ids += here;
        inputs_with_ids += here > 0;
      }
      EXPECT_EQ(static_cast<int64_t>(trace.size()), ids);
      EXPECT_EQ(seen.size(), inputs_with_ids);
      EXPECT_GT(inputs_with_ids, 10u);
    }
  }
}

}  // namespace
}  // namespace rankd
