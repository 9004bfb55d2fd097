// The host-copy counters (common/host_copies.h, rankd_host_input_copy_bytes_total{stage}): each
// stage counts the bytes it copies of requests' inputs, and nothing it reads in place.
#include "common/host_copies.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "batching/batch_merge.h"
#include "frontend/grpc_request.h"
#include "frontend/shared_memory_regions.h"
#include "serving/metrics.h"
#include "serving/shape_buckets.h"
#include "test_util.h"

namespace rankd {
namespace {

// Bytes counted at `stage` while `work` runs.
template <typename Work>
uint64_t Counted(HostCopy stage, Work&& work) {
  const uint64_t before = HostCopiedBytes(stage);
  work();
  return HostCopiedBytes(stage) - before;
}

TEST(HostCopies, RawContentsAndRegionsCopiedIntoRequestTensorsAreCounted) {
  inference::ModelInferRequest proto;
  proto.set_model_name("m");
  auto* t = proto.add_inputs();
  t->set_name("x");
  t->set_datatype("FP32");
  t->add_shape(2);
  t->add_shape(13);
  proto.add_raw_input_contents(std::string(2 * 13 * 4, '\0'));
  EXPECT_EQ(
      Counted(HostCopy::kRequest, [&] { ASSERT_TRUE(InferRequestFromProto(proto, int64_t{1} << 20, nullptr).ok()); }),
      104u);

  // A region: copied when the caller takes no views, read in place (nothing counted) when it does.
  const std::string key = "/rankd-host-copies-" + std::to_string(getpid());
  const int fd = shm_open(key.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 8192), 0);
  close(fd);
  SharedMemoryRegions shm;
  ASSERT_TRUE(shm.Register("r", key, 0, 8192).ok());
  inference::ModelInferRequest in_region;
  in_region.set_model_name("m");
  auto* x = in_region.add_inputs();
  x->set_name("x");
  x->set_datatype("FP32");
  x->add_shape(1);
  x->add_shape(13);
  (*x->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*x->mutable_parameters())["shared_memory_byte_size"].set_int64_param(52);
  EXPECT_EQ(
      Counted(HostCopy::kRequest, [&] { ASSERT_TRUE(InferRequestFromProto(in_region, int64_t{1} << 20, &shm).ok()); }),
      52u);
  std::vector<SharedMemoryRegions::Use> viewed;
  EXPECT_EQ(Counted(HostCopy::kRequest,
                    [&] {
                      auto r = InferRequestFromProto(in_region, int64_t{1} << 20, &shm, nullptr, &viewed);
                      ASSERT_TRUE(r.ok()) << r.status().ToString();
                      EXPECT_EQ(r->request.inputs[0].data.location(), MemoryLocation::SharedMemory());
                    }),
            0u);
  EXPECT_EQ(viewed.size(), 1u);
  shm_unlink(key.c_str());
}

TEST(HostCopies, MergingAndPaddingCountWhatTheyCopyAndNotWhatTheyView) {
  const std::vector<GraphInputKind> kinds = {
      {GraphInputKind::kDense, -1}, {GraphInputKind::kValues, 0}, {GraphInputKind::kOffsets, 0}};
  auto request = [](int64_t rows, std::vector<int64_t> ids, std::vector<int64_t> offsets) {
    PreparedRequest p;
    p.rows = rows;
    p.inputs.push_back(testing::MakeF32({rows, 3}, std::vector<float>(static_cast<size_t>(rows) * 3, 1.0f)));
    p.inputs.push_back(testing::MakeI64({static_cast<int64_t>(ids.size())}, ids));
    p.inputs.push_back(testing::MakeI64({rows + 1}, offsets));
    p.ragged_max_lengths = {2};
    return p;
  };
  const PreparedRequest a = request(2, {1, 2, 3}, {0, 2, 3}), b = request(1, {4}, {0, 1});
  PreparedRequest merged;
  // The dense rows and the ids of both (the offsets are rebuilt, not copied).
  EXPECT_EQ(Counted(HostCopy::kMerge, [&] { merged = MergeRequests({&a, &b}, kinds); }), (3 * 3 * 4) + (4 * 8u));
  // Padded to a bucket of 4 rows: the dense rows copied into the padded tensor, the ids viewed.
  BucketKey key;
  key.rows = 4;
  key.lengths = {2};
  EXPECT_EQ(Counted(HostCopy::kPad, [&] { PadToBucket(merged, key, kinds, /*ids_unpadded=*/true); }), 3 * 3 * 4u);
  // Already the bucket's rows, its ids unpadded: all viewed.
  key.rows = 3;
  EXPECT_EQ(Counted(HostCopy::kPad, [&] { PadToBucket(merged, key, kinds, /*ids_unpadded=*/true); }), 0u);
}

TEST(HostCopies, MetricsShowEveryStage) {
  CountHostCopy(HostCopy::kStaging, 7);
  const std::string text = Metrics().Text();
  EXPECT_NE(text.find("# TYPE rankd_host_input_copy_bytes_total counter"), std::string::npos);
  for (HostCopy stage : {HostCopy::kRequest, HostCopy::kMerge, HostCopy::kPad, HostCopy::kStaging}) {
    const std::string line = std::string("rankd_host_input_copy_bytes_total{stage=\"") + HostCopyName(stage) + "\"} " +
                             std::to_string(HostCopiedBytes(stage)) + "\n";
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
  EXPECT_GE(HostCopiedBytes(HostCopy::kStaging), 7u);
}

}  // namespace
}  // namespace rankd
