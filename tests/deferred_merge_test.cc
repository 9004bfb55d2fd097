// A merged batch's ragged values left to their reader (common/deferred_merge.h): which inputs
// MergeRequests defers, and that whoever writes them writes what a merge on the host would have.
#include "common/deferred_merge.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "batching/batch_merge.h"
#include "common/host_allocator.h"
#include "common/host_copies.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::MakeF32;
using testing::MakeI64;

// Aligned heap blocks that say they are pinned, as the CUDA pool's are.
class FakePinned final : public HostAllocator {
 public:
  void* Allocate(size_t bytes) override { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
  void Free(void* p, size_t) override { std::free(p); }
  MemoryLocation location() const override { return MemoryLocation::Pinned(); }
  size_t reserved_bytes() const override { return 0; }
};

class DeferredMergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = CurrentHostAllocator();
    SetHostAllocator(&pinned_);
  }
  void TearDown() override { SetHostAllocator(previous_); }

  // `t` copied into a request tensor (pinned here).
  static Tensor Request(const Tensor& t) {
    RequestTensorScope scope;
    Tensor out = Tensor::Empty(t.dtype(), t.shape());
    if (t.bytes() > 0) std::memcpy(out.raw(), t.raw(), t.bytes());
    return out;
  }

  FakePinned pinned_;
  HostAllocator* previous_ = nullptr;
};

const std::vector<GraphInputKind> kKinds = {
    {GraphInputKind::kDense, -1}, {GraphInputKind::kValues, 0}, {GraphInputKind::kOffsets, 0}};

TEST_F(DeferredMergeTest, RaggedValuesAreLeftToTheirReaderAndWrittenAsAMergeWould) {
  PreparedRequest a, b, c;
  a.inputs = {Request(MakeF32({2, 2}, {1, 2, 3, 4})), Request(MakeI64({3}, {7, 8, 9})), MakeI64({3}, {0, 1, 3})};
  b.inputs = {Request(MakeF32({1, 2}, {5, 6})), Request(MakeI64({0}, {})), MakeI64({2}, {0, 0})};
  c.inputs = {Request(MakeF32({1, 2}, {7, 8})), Request(MakeI64({2}, {4, 5})), MakeI64({2}, {0, 2})};
  a.rows = 2;
  b.rows = c.rows = 1;
  a.ragged_max_lengths = {2};
  b.ragged_max_lengths = {0};
  c.ragged_max_lengths = {2};
  const uint64_t merge_before = HostCopiedBytes(HostCopy::kMerge);
  PreparedRequest m;
  {
    RequestTensorScope scope;
    m = MergeRequests({&a, &b, &c}, kKinds, /*defer=*/true);
  }
  // The dense rows are merged on the host; the ids are not.
  EXPECT_EQ(HostCopiedBytes(HostCopy::kMerge) - merge_before, 4u * 4u * 2u);
  ASSERT_NE(m.deferred, nullptr);
  EXPECT_EQ(testing::RelativeError(m.inputs[0], MakeF32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8})), 0.0);
  EXPECT_EQ(testing::RelativeError(m.inputs[2], MakeI64({5}, {0, 1, 3, 3, 5})), 0.0);
  const Tensor& ids = m.inputs[1];
  ASSERT_EQ(ids.shape(), Shape{5});
  // Found by where its bytes lie and how many they are; a view of part of them is not it.
  EXPECT_EQ(m.deferred->Find(ids.raw(), ids.bytes() - 8), nullptr);
  const std::vector<Tensor>* parts = m.deferred->Find(ids.raw(), ids.bytes());
  ASSERT_NE(parts, nullptr);
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0].raw(), a.inputs[1].raw()) << "the parts are the requests' own tensors";
  EXPECT_EQ((*parts)[2].raw(), c.inputs[1].raw());
  m.deferred->WriteRest();
  EXPECT_EQ(HostCopiedBytes(HostCopy::kMerge) - merge_before, 4u * 4u * 2u + 5u * 8u);
  EXPECT_EQ(testing::RelativeError(ids, MakeI64({5}, {7, 8, 9, 4, 5})), 0.0);
  EXPECT_EQ(m.deferred->Find(ids.raw(), ids.bytes()), nullptr) << "written: no longer pending";
}

TEST_F(DeferredMergeTest, ATakenInputIsNotWritten) {
  PreparedRequest a, b;
  a.inputs = {Request(MakeF32({1, 2}, {1, 2})), Request(MakeI64({2}, {1, 2})), MakeI64({2}, {0, 2})};
  b.inputs = {Request(MakeF32({1, 2}, {3, 4})), Request(MakeI64({1}, {3})), MakeI64({2}, {0, 1})};
  a.rows = b.rows = 1;
  a.ragged_max_lengths = b.ragged_max_lengths = {2};
  PreparedRequest m;
  {
    RequestTensorScope scope;
    m = MergeRequests({&a, &b}, kKinds, /*defer=*/true);
  }
  ASSERT_NE(m.deferred, nullptr);
  Tensor& ids = m.inputs[1];
  std::memset(ids.raw(), 0x5a, ids.bytes());
  ASSERT_NE(m.deferred->Take(ids.raw(), ids.bytes()), nullptr);
  EXPECT_EQ(m.deferred->Take(ids.raw(), ids.bytes()), nullptr) << "taken once";
  m.deferred->WriteRest();
  EXPECT_EQ(static_cast<const uint8_t*>(ids.raw())[0], 0x5a) << "its reader gathers the parts itself";
}

TEST_F(DeferredMergeTest, OnlyPinnedAlignedPartsOfWideElementsAreDeferred) {
  PreparedRequest a, b;
  a.inputs = {Request(MakeF32({1, 2}, {1, 2})), Request(MakeI64({2}, {1, 2})), MakeI64({2}, {0, 2})};
  // Heap memory: a GPU cannot read it in place, so the merge writes the ids at once.
  b.inputs = {Request(MakeF32({1, 2}, {3, 4})), MakeI64({1}, {3}), MakeI64({2}, {0, 1})};
  a.rows = b.rows = 1;
  a.ragged_max_lengths = b.ragged_max_lengths = {2};
  PreparedRequest m;
  {
    RequestTensorScope scope;
    m = MergeRequests({&a, &b}, kKinds, /*defer=*/true);
  }
  EXPECT_EQ(m.deferred, nullptr);
  EXPECT_EQ(testing::RelativeError(m.inputs[1], MakeI64({3}, {1, 2, 3})), 0.0);
  // Without `defer` nothing is left unwritten, whatever the parts.
  b.inputs[1] = Request(MakeI64({1}, {3}));
  {
    RequestTensorScope scope;
    m = MergeRequests({&a, &b}, kKinds);
  }
  EXPECT_EQ(m.deferred, nullptr);
  EXPECT_EQ(testing::RelativeError(m.inputs[1], MakeI64({3}, {1, 2, 3})), 0.0);
  // Views that do not start 16-byte aligned, or of one-byte elements, are not gathered either.
  EXPECT_FALSE(GatherablePart(a.inputs[1].ViewBytes(DType::kI64, {1}, 8)));
  EXPECT_FALSE(GatherablePart(a.inputs[1].ViewBytes(DType::kU8, {16})));
  EXPECT_TRUE(GatherablePart(a.inputs[1]));
  EXPECT_TRUE(GatherablePart(a.inputs[0]));
}

}  // namespace
}  // namespace rankd
