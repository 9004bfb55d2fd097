// Request tensors (made inside a RequestTensorScope) take the installed host allocator; every
// other tensor, such as a model's weights, takes the heap (common/host_allocator.h).
#include "common/host_allocator.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "frontend/kserve_json.h"
#include "rankd/tensor.h"
#include "serving/metrics.h"

namespace rankd {
namespace {

// Hands out heap blocks and remembers which are out; `refuse` makes it leave every one to the heap.
class CountingAllocator final : public HostAllocator {
 public:
  void* Allocate(size_t bytes) override {
    if (refuse) return nullptr;
    void* p = std::aligned_alloc(64, bytes);
    out[p] = bytes;
    ++allocated;
    return p;
  }
  void Free(void* p, size_t bytes) override {
    EXPECT_EQ(out.at(p), bytes) << "freed with the size it was allocated with";
    out.erase(p);
    std::free(p);
  }
  MemoryLocation location() const override { return MemoryLocation::Pinned(); }
  size_t reserved_bytes() const override {
    size_t bytes = 0;
    for (const auto& [p, n] : out) bytes += n;
    return bytes;
  }
  // Whether `t` is one of its blocks, which then says it is pinned (as the CUDA pool's are).
  bool Gave(const Tensor& t) const {
    const bool gave = out.count(const_cast<void*>(t.raw())) > 0;
    EXPECT_EQ(t.location().kind, gave ? MemoryKind::kPinned : MemoryKind::kHost) << LocationToString(t.location());
    return gave;
  }

  bool refuse = false;
  int allocated = 0;
  std::map<void*, size_t> out;
};

class HostAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = CurrentHostAllocator();  // the CUDA backend's pool, where a GPU was found
    SetHostAllocator(&counting_);
  }
  void TearDown() override {
    SetHostAllocator(previous_);
    EXPECT_TRUE(counting_.out.empty()) << "every block came back";
  }
  CountingAllocator counting_;
  HostAllocator* previous_ = nullptr;
};

TEST_F(HostAllocatorTest, OnlyRequestTensorsTakeIt) {
  Tensor weight = Tensor::Zeros(DType::kF32, {64, 64});
  EXPECT_FALSE(counting_.Gave(weight)) << "a tensor made outside any scope is on the heap";
  {
    RequestTensorScope outer;
    Tensor ids = Tensor::Empty(DType::kI64, {100});
    EXPECT_TRUE(counting_.Gave(ids));
    {
      RequestTensorScope inner;
      EXPECT_TRUE(counting_.Gave(Tensor::Zeros(DType::kF32, {3})));
    }
    Tensor after_inner = Tensor::Zeros(DType::kI32, {7});
    EXPECT_TRUE(counting_.Gave(after_inner)) << "an inner scope's end leaves the outer one in force";
    Tensor copy = after_inner;  // shares the block: freed once, when the last holder goes
    EXPECT_EQ(copy.raw(), after_inner.raw());
    EXPECT_EQ(copy.location(), MemoryLocation::Pinned());
    EXPECT_EQ(after_inner.Rows(2, 3).location(), MemoryLocation::Pinned()) << "a part lies where the whole does";
  }
  EXPECT_FALSE(counting_.Gave(Tensor::Zeros(DType::kF32, {5}))) << "scope ended";
  EXPECT_EQ(counting_.allocated, 3);
}

TEST_F(HostAllocatorTest, ARefusedBlockComesFromTheHeapAndIsCounted) {
  RequestTensorScope scope;
  const uint64_t before = RequestTensorsOnHeap();
  Tensor served = Tensor::Empty(DType::kF32, {10});
  EXPECT_EQ(counting_.reserved_bytes(), 192u) << "40 bytes, padded to 64, a line of slack, a line for its owner";
  counting_.refuse = true;
  Tensor t = Tensor::Zeros(DType::kF32, {1000});
  EXPECT_FALSE(counting_.Gave(t));
  t.data<float>()[999] = 1.0f;  // usable memory all the same
  EXPECT_EQ(t.data<float>()[0], 0.0f);
  EXPECT_EQ(RequestTensorsOnHeap(), before + 1) << "only the refused one";
  const std::string text = Metrics().Text();  // both, where a pool is installed
  EXPECT_NE(text.find("rankd_request_tensor_pool_bytes 192\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rankd_request_tensors_on_heap_total " + std::to_string(before + 1) + "\n"), std::string::npos);
  SetHostAllocator(nullptr);
  EXPECT_EQ(Metrics().Text().find("rankd_request_tensor_pool_bytes"), std::string::npos) << "no pool, no figure";
  SetHostAllocator(&counting_);
}

// A tensor's owner (its shared_ptr's control block) lives in its block's last line: one
// allocation a tensor. The block goes back once, with the size it was taken with, when the last
// holder and observer are gone; the data and the owner never overlap.
TEST_F(HostAllocatorTest, ATensorsBlockHoldsItsOwnerAndGoesBackWithTheLast) {
  for (bool pooled : {true, false}) {
    counting_.refuse = !pooled;
    const int64_t elements = pooled ? 1000 : 37;
    std::weak_ptr<const void> observer;
    {
      RequestTensorScope scope;
      Tensor t = Tensor::Zeros(DType::kI32, {elements});
      EXPECT_EQ(counting_.Gave(t), pooled);
      for (int64_t i = 0; i < elements; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(~i);
      std::vector<Tensor> copies(5, t);
      Tensor part = t.Rows(3, 9);
      copies.clear();  // the counts move in the owner's line, not in the data
      for (int64_t i = 0; i < elements; ++i) ASSERT_EQ(t.data<int32_t>()[i], static_cast<int32_t>(~i)) << i;
      std::shared_ptr<const void> keep = t.keeper();
      observer = keep;
      t = Tensor();
      EXPECT_EQ(part.data<int32_t>()[0], ~3);
      EXPECT_EQ(counting_.out.size(), pooled ? 1u : 0u);
    }
    EXPECT_TRUE(observer.expired());
    EXPECT_EQ(counting_.out.size(), pooled ? 1u : 0u) << "an observer keeps the owner's line, so the block";
    observer.reset();
    EXPECT_TRUE(counting_.out.empty()) << "back with the last observer";
  }
  counting_.refuse = false;
}

TEST_F(HostAllocatorTest, AParsedRequestsTensorsTakeIt) {
  auto request = ParseInferRequestJson(
      R"({"inputs": [{"name": "ids", "datatype": "INT64", "shape": [3], "data": [1, 2, 3], "parameters": {"lengths": [2, 1]}},
                     {"name": "x", "datatype": "FP32", "shape": [2, 2], "data": [1, 2, 3, 4]}]})");
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  ASSERT_EQ(request->inputs.size(), 2u);
  for (const InferInput& in : request->inputs) EXPECT_TRUE(counting_.Gave(in.data)) << in.name;
  EXPECT_EQ(request->inputs[0].data.data<int64_t>()[2], 3);
}

}  // namespace
}  // namespace rankd

namespace rankd {
namespace {

TEST(TensorLocation, ViewsSayWhereTheyLie) {
  float host[4] = {1, 2, 3, 4};
  EXPECT_EQ(Tensor::View(DType::kF32, {4}, host).location(), MemoryLocation::Host());
  Tensor shared = Tensor::View(DType::kF32, {2, 2}, host, MemoryLocation::SharedMemory());
  EXPECT_EQ(shared.location().kind, MemoryKind::kSharedMemory);
  EXPECT_EQ(shared.Rows(1, 1).location(), MemoryLocation::SharedMemory());
  Tensor clone = shared.Clone();
  EXPECT_EQ(clone.location(), MemoryLocation::Host()) << "a clone owns host memory of its own";
  EXPECT_EQ(clone.data<float>()[3], 4.0f);
  Tensor device =
      Tensor::View(DType::kF32, {4}, reinterpret_cast<void*>(uintptr_t{1} << 40), MemoryLocation::Device(1));
  EXPECT_FALSE(device.location().host_accessible());
  EXPECT_EQ(device.location().device, 1);
  EXPECT_EQ(LocationToString(device.location()), "GPU 1");
  EXPECT_EQ(LocationToString(MemoryLocation::Pinned()), "pinned");
  EXPECT_DEATH((void)device.Clone(), "device memory");
}

}  // namespace
}  // namespace rankd
