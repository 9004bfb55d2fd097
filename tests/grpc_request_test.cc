// The KServe v2 gRPC request builder (frontend/grpc_request.h) against good and malformed messages.
#include "frontend/grpc_request.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace rankd {
namespace {

// One ragged INT64 input of `values` in raw contents, its lengths given as `lengths`.
inference::ModelInferRequest RaggedRequest(const std::vector<int64_t>& values, const std::string& lengths) {
  inference::ModelInferRequest p;
  auto* in = p.add_inputs();
  in->set_name("ids");
  in->set_datatype("INT64");
  in->add_shape(static_cast<int64_t>(values.size()));
  (*in->mutable_parameters())["lengths"].set_string_param(lengths);
  p.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
  return p;
}

TEST(GrpcRequest, ReadsRaggedLengthsAndSumsThem) {
  auto r = InferRequestFromProto(RaggedRequest({5, 6, 7, 8, 9}, "3,0,2"), int64_t{1} << 26);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->request.inputs.size(), 1u);
  EXPECT_EQ(r->request.inputs[0].lengths, std::vector<int64_t>({3, 0, 2}));
  EXPECT_EQ(r->request.inputs[0].data.data<int64_t>()[4], 9);
  ASSERT_EQ(r->length_sums.size(), 1u);
  EXPECT_EQ(r->length_sums[0].min_length, 0);
  EXPECT_EQ(r->length_sums[0].max_length, 3);
  EXPECT_EQ(r->length_sums[0].offsets.data<int64_t>()[3], 5);

  std::string many;  // W1's size: thousands of lengths in one string
  std::vector<int64_t> values;
  for (int i = 0; i < 7000; ++i) {
    many += (i ? "," : "") + std::to_string(i % 4);
    values.insert(values.end(), static_cast<size_t>(i % 4), i);
  }
  auto big = InferRequestFromProto(RaggedRequest(values, many), int64_t{1} << 26);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  ASSERT_EQ(big->request.inputs[0].lengths.size(), 7000u);
  EXPECT_EQ(big->request.inputs[0].lengths[6999], 6999 % 4);
}

TEST(GrpcRequest, MalformedLengthsAreRefusedWithTheInputsName) {
  for (const char* bad : {"3,,2", "3,", ",3", "a", "3;2", "-1", "+3", "3, 2", "1234567890123"}) {
    auto r = InferRequestFromProto(RaggedRequest({1, 2, 3}, bad), int64_t{1} << 26);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("input 'ids': lengths must be"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace rankd
