// Triton's system and CUDA shared memory extensions (frontend/shared_memory_regions.h): regions map a range
// of a POSIX shared memory object, refuse ranges past it, stay mapped while a request holds them;
// JSON inputs and outputs naming a region read and write it, and malformed parameters are refused.
#include "frontend/shared_memory_regions.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "frontend/base64.h"
#include "frontend/grpc_request.h"
#include "frontend/kserve_json.h"
#include "runtime/backends.h"

namespace rankd {
namespace {

// A shared memory object of `bytes` zero bytes, unlinked when the test ends.
class SharedObject {
 public:
  explicit SharedObject(size_t bytes) : key_("/rankd-test-" + std::to_string(getpid())) {
    const int fd = shm_open(key_.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
    close(fd);
  }
  ~SharedObject() { shm_unlink(key_.c_str()); }
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

TEST(SharedMemoryRegions, RegistersRangesOfAnObjectAndRefusesWhatIsNotThere) {
  SharedObject object(4096);
  SharedMemoryRegions shm;
  ASSERT_TRUE(shm.Register("a", object.key(), 100, 200).ok());
  EXPECT_FALSE(shm.Register("a", object.key(), 0, 8).ok());  // the name is taken
  EXPECT_EQ(shm.Register("b", "/rankd-absent", 0, 8).code(), StatusCode::kNotFound);
  EXPECT_EQ(shm.Register("b", object.key(), 4000, 200).code(), StatusCode::kInvalidArgument);  // past its end
  EXPECT_EQ(shm.Register("b", object.key(), 0, 0).code(), StatusCode::kInvalidArgument);
  auto listed = shm.List(SharedMemoryRegions::Kind::kSystem, "");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key, object.key());
  EXPECT_EQ((*listed)[0].offset, 100u);
  EXPECT_EQ((*listed)[0].byte_size, 200u);

  auto use = shm.Find("a", 150, 50);
  ASSERT_TRUE(use.ok()) << use.status().ToString();
  EXPECT_EQ(use->size, 50u);
  EXPECT_FALSE(shm.Find("a", 150, 51).ok());
  EXPECT_FALSE(shm.Find("a", 201, 0).ok());
  EXPECT_EQ(shm.Find("z", 0, 1).status().code(), StatusCode::kNotFound);
  // Unregistered while a request holds it: still mapped for that request, gone for the next.
  // The kinds are apart: a system region is not a CUDA one.
  EXPECT_EQ(shm.Unregister(SharedMemoryRegions::Kind::kCuda, "a").code(), StatusCode::kNotFound);
  EXPECT_TRUE(shm.List(SharedMemoryRegions::Kind::kCuda, "")->empty());
  EXPECT_EQ(shm.List(SharedMemoryRegions::Kind::kCuda, "a").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(shm.Unregister(SharedMemoryRegions::Kind::kSystem, "a").ok());
  const std::string sevens(50, '\x07');
  ASSERT_TRUE(use->Write(sevens.data(), sevens.size()).ok());
  std::string back(50, '\0');
  ASSERT_TRUE(use->Read(back.data()).ok());
  EXPECT_EQ(back, sevens);
  EXPECT_EQ(shm.Find("a", 0, 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(shm.Unregister(SharedMemoryRegions::Kind::kSystem, "a").code(), StatusCode::kNotFound);
  EXPECT_TRUE(shm.Unregister(SharedMemoryRegions::Kind::kSystem, "").ok());
}

TEST(SharedMemoryRegions, JsonInputsAndOutputsReadAndWriteTheirRegions) {
  SharedObject object(256);
  SharedMemoryRegions shm;
  ASSERT_TRUE(shm.Register("r", object.key(), 0, 256).ok());
  auto region = shm.Find("r", 0, 256);
  ASSERT_TRUE(region.ok());
  const float x[3] = {1.5f, -2.0f, 3.25f};
  ASSERT_TRUE(shm.Find("r", 16, sizeof(x))->Write(x, sizeof(x)).ok());
  const std::string body =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,3],"parameters":{"shared_memory_region":"r",)"
      R"("shared_memory_offset":16,"shared_memory_byte_size":12}}],)"
      R"("outputs":[{"name":"y","parameters":{"shared_memory_region":"r","shared_memory_offset":64,)"
      R"("shared_memory_byte_size":8}}]})";
  auto parsed = ParseInferRequest(body, std::string_view(), {}, &shm);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Tensor& in = parsed->request.inputs[0].data;
  ASSERT_EQ(in.shape(), (Shape{1, 3}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(in.data<float>()[i], x[i]);
  ASSERT_EQ(parsed->shared_memory_outputs.size(), 1u);

  std::vector<InferOutput> outputs(1);
  outputs[0].name = "y";
  outputs[0].data = Tensor::Zeros(DType::kF32, {1, 2});
  outputs[0].data.data<float>()[0] = 4.0f, outputs[0].data.data<float>()[1] = 5.0f;
  ASSERT_TRUE(WriteSharedMemoryOutputs(outputs, parsed->shared_memory_outputs).ok());
  float y[2];
  ASSERT_TRUE(shm.Find("r", 64, sizeof(y))->Read(y).ok());
  EXPECT_EQ(y[0], 4.0f);
  EXPECT_EQ(y[1], 5.0f);
  InferResponseBody response = MakeInferResponse("m", 1, "", outputs, false, {}, parsed->shared_memory_outputs);
  EXPECT_NE(response.body.find(R"("parameters":{"shared_memory_region":"r","shared_memory_byte_size":8})"),
            std::string::npos)
      << response.body;
  outputs[0].data = Tensor::Zeros(DType::kF32, {1, 3});  // 12 bytes where 8 were given
  EXPECT_FALSE(WriteSharedMemoryOutputs(outputs, parsed->shared_memory_outputs).ok());

  const std::string input = R"({"name":"x","datatype":"FP32","shape":[1,3],"parameters":)";
  for (const std::string& bad : {
           input + R"({"shared_memory_region":7,"shared_memory_byte_size":12}}]})",
           input + R"({"shared_memory_region":"r"}}]})",
           input + R"({"shared_memory_region":"r","shared_memory_byte_size":12,"shared_memory_offset":-1}}]})",
           input + R"({"shared_memory_region":"r","shared_memory_byte_size":12,"binary_data_size":12}}]})",
           input + R"({"shared_memory_region":"r","shared_memory_byte_size":12},"data":[1,2,3]}]})",
           input + R"({"shared_memory_region":"r","shared_memory_byte_size":12,"shared_memory_offset":250}}]})",
       }) {
    auto r = ParseInferRequest(R"({"inputs":[)" + bad, std::string_view(), {}, &shm);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("input 'x'"), std::string::npos) << r.status().ToString();
    }
  }
  auto no_registry = ParseInferRequest(body, std::string_view(), {}, nullptr);
  EXPECT_EQ(no_registry.status().code(), StatusCode::kUnimplemented);
}

// A client that truncates its object after registering it: copies fail naming the object, and
// the process lives (without the guard, the first read past the new end raised SIGBUS).
TEST(SharedMemoryRegions, AnObjectTruncatedUnderItsRegionFailsItsCopiesAndNothingElse) {
  SharedObject object(64 * 1024);
  SharedMemoryRegions shm;
  ASSERT_TRUE(shm.Register("t", object.key(), 0, 64 * 1024).ok());
  auto use = shm.Find("t", 32 * 1024, 16);
  ASSERT_TRUE(use.ok());
  char bytes[16] = {};
  ASSERT_TRUE(use->Read(bytes).ok());
  const int fd = shm_open(object.key().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  close(fd);
  Status read = use->Read(bytes);
  EXPECT_EQ(read.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(read.message().find("'" + object.key() + "' was truncated after it was registered"), std::string::npos)
      << read.ToString();
  EXPECT_EQ(use->Write(bytes, sizeof(bytes)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shm.Find("t", 0, 8)->Read(bytes).code(), StatusCode::kInvalidArgument);  // every later copy too
  EXPECT_TRUE(shm.Unregister(SharedMemoryRegions::Kind::kSystem, "t").ok());
}

// Inputs whose bytes lie 64-byte aligned with room after them are views of the region (located in
// shared memory, read where the client writes them, keeping the region open after it is
// unregistered), over HTTP's parser and gRPC's; others are copied. A truncation under a view makes
// CheckSharedMemoryInputs fail the request that read it.
TEST(SharedMemoryRegions, InputsAreReadInPlaceKeepTheirRegionAndAreCheckedAfterwards) {
  constexpr size_t kBytes = 64 * 1024;
  SharedObject object(kBytes);
  SharedMemoryRegions shm;
  ASSERT_TRUE(shm.Register("v", object.key(), 0, kBytes).ok());
  const int fd = shm_open(object.key().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  auto* client = static_cast<float*>(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(client, MAP_FAILED);
  for (size_t i = 0; i < kBytes / 4; ++i) client[i] = static_cast<float>(i);
  auto body = [](const char* dtype, size_t offset, size_t bytes) {
    const size_t elements = std::string(dtype) == "BOOL" ? bytes : bytes / 4;
    return std::string(R"({"inputs":[{"name":"x","datatype":")") + dtype + R"(","shape":[1,)" +
           std::to_string(elements) + R"(],"parameters":{"shared_memory_region":"v","shared_memory_offset":)" +
           std::to_string(offset) + R"(,"shared_memory_byte_size":)" + std::to_string(bytes) + "}}]}";
  };
  auto in_place = ParseInferRequest(body("FP32", 8192, 52), std::string_view(), {}, &shm);
  ASSERT_TRUE(in_place.ok()) << in_place.status().ToString();
  Tensor x = in_place->request.inputs[0].data;
  EXPECT_EQ(x.location(), MemoryLocation::SharedMemory());
  EXPECT_TRUE(x.owns()) << "the view keeps its region open";
  ASSERT_EQ(in_place->shared_memory_inputs.size(), 1u);
  EXPECT_EQ(x.data<float>()[0], 2048.0f);
  client[2048] = -1.5f;  // the client writes: the view reads it, nothing was copied
  EXPECT_EQ(x.data<float>()[0], -1.5f);
  EXPECT_TRUE(CheckSharedMemoryInputs(in_place->shared_memory_inputs).ok());

  // Copied: an offset not 64-byte aligned, bytes with fewer than 64 mapped bytes after them, BOOL.
  for (const std::string& copied : {body("FP32", 8196, 52), body("FP32", kBytes - 64, 52), body("BOOL", 8192, 52)}) {
    auto r = ParseInferRequest(copied, std::string_view(), {}, &shm);
    ASSERT_TRUE(r.ok()) << copied << ": " << r.status().ToString();
    EXPECT_NE(r->request.inputs[0].data.location().kind, MemoryKind::kSharedMemory) << copied;
    EXPECT_TRUE(r->shared_memory_inputs.empty()) << copied;
  }

  // gRPC: in place only for a caller that checks afterwards.
  inference::ModelInferRequest proto;
  proto.set_model_name("m");
  auto* t = proto.add_inputs();
  t->set_name("x");
  t->set_datatype("FP32");
  t->add_shape(1);
  t->add_shape(13);
  (*t->mutable_parameters())["shared_memory_region"].set_string_param("v");
  (*t->mutable_parameters())["shared_memory_offset"].set_int64_param(8192);
  (*t->mutable_parameters())["shared_memory_byte_size"].set_int64_param(52);
  std::vector<SharedMemoryRegions::Use> grpc_in_place;
  auto viewed = InferRequestFromProto(proto, int64_t{1} << 20, &shm, nullptr, &grpc_in_place);
  ASSERT_TRUE(viewed.ok()) << viewed.status().ToString();
  EXPECT_EQ(viewed->request.inputs[0].data.location(), MemoryLocation::SharedMemory());
  EXPECT_EQ(grpc_in_place.size(), 1u);
  auto copied = InferRequestFromProto(proto, int64_t{1} << 20, &shm);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_NE(copied->request.inputs[0].data.location().kind, MemoryKind::kSharedMemory);
  EXPECT_EQ(copied->request.inputs[0].data.data<float>()[0], -1.5f);

  // Unregistered while a request holds a view: the bytes stay mapped until the view goes.
  ASSERT_TRUE(shm.Unregister(SharedMemoryRegions::Kind::kSystem, "v").ok());
  EXPECT_EQ(x.data<float>()[1], 2049.0f);
  // Truncated under the view: reads find zeros (not SIGBUS), and the check fails the request.
  ASSERT_EQ(ftruncate(fd, 0), 0);
  EXPECT_EQ(x.data<float>()[2], 0.0f);
  Status checked = CheckSharedMemoryInputs(in_place->shared_memory_inputs);
  EXPECT_EQ(checked.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(checked.message().find("was truncated after it was registered"), std::string::npos) << checked.ToString();
  munmap(client, kBytes);
  close(fd);
}

// A backend that locks nothing but records what it is asked to page-lock and how much is still
// locked (the CUDA backend's own locking runs on a GPU: tests/cuda_io_test.cc).
class PinRecorder final : public Backend {
 public:
  const char* name() const override { return "pin recorder"; }
  const Kernel* FindKernel(const std::string&) const override { return nullptr; }
  StatusOr<std::shared_ptr<ModelResources>> PrepareModel(const Graph&, const PrepareOptions&) const override {
    return Unimplemented("no models here");
  }
  DeviceKind device_kind() const override { return DeviceKind::kCuda; }
  StatusOr<std::unique_ptr<PinnedHostMemory>> PinHostMemory(void* data, size_t bytes) const override {
    if (refuse) return Internal("the driver refuses");
    locked.push_back({data, bytes});
    return std::unique_ptr<PinnedHostMemory>(new Lock(live));
  }
  bool refuse = false;
  mutable std::vector<std::pair<void*, size_t>> locked;  // every range asked for
  std::shared_ptr<int> live = std::make_shared<int>(0);  // locks not yet released

 private:
  struct Lock final : PinnedHostMemory {
    explicit Lock(std::shared_ptr<int> count) : live(std::move(count)) { ++*live; }
    ~Lock() override { --*live; }
    std::shared_ptr<int> live;
  };
};

// On a GPU server each system region is page-locked as it is registered, its pages counted against
// a limit that refuses a region past it; views of its bytes are located pinned (a GPU reads them
// in place); the lock ends when the region closes (after the last request holding it); a region
// the driver will not lock is registered unlocked and its inputs copied; a truncation is caught by
// the object's size, with no fault needed (a GPU reading locked pages raises none).
TEST(SharedMemoryRegions, RegionsArePageLockedForTheGpusWithinTheirLimit) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  SharedObject object(4 * page);
  PinRecorder gpu;
  SharedMemoryRegions shm;
  shm.SetPinning(&gpu, 2 * page);
  ASSERT_TRUE(shm.Register("p", object.key(), 0, page).ok());
  ASSERT_EQ(gpu.locked.size(), 1u);
  EXPECT_EQ(gpu.locked[0].second, page);
  EXPECT_EQ(shm.pinned_bytes(), page);
  Tensor x = shm.Find("p", 64, 52)->View(DType::kF32, {1, 13});
  ASSERT_TRUE(x.defined());
  EXPECT_EQ(x.location(), MemoryLocation::Pinned());
  const auto* first = static_cast<const uint8_t*>(gpu.locked[0].first);
  EXPECT_TRUE(x.raw() >= first && static_cast<const uint8_t*>(x.raw()) + x.bytes() <= first + page);

  // Two pages more would pass the limit: refused, nothing locked or registered for it.
  Status past = shm.Register("q", object.key(), page, 2 * page - 8);
  EXPECT_EQ(past.code(), StatusCode::kResourceExhausted) << past.ToString();
  EXPECT_NE(past.message().find("shared memory region 'q': its " + std::to_string(2 * page) +
                                " bytes (whole pages) would take the page-locked shared memory to " +
                                std::to_string(3 * page) + " bytes, past the limit of " + std::to_string(2 * page)),
            std::string::npos)
      << past.ToString();
  EXPECT_EQ(*gpu.live, 1);
  EXPECT_EQ(shm.pinned_bytes(), page);
  EXPECT_EQ(shm.Find("q", 0, 1).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(shm.Register("q", object.key(), 2 * page, 100).ok());  // one page fits
  EXPECT_EQ(shm.pinned_bytes(), 2 * page);

  // Unregistered while a view holds it: locked until the view goes.
  ASSERT_TRUE(shm.Unregister(SharedMemoryRegions::Kind::kSystem, "p").ok());
  EXPECT_EQ(*gpu.live, 2);
  x = Tensor();
  EXPECT_EQ(*gpu.live, 1);
  EXPECT_EQ(shm.pinned_bytes(), page);

  // The driver refuses: registered unlocked, its inputs copied (a GPU server views none unlocked).
  gpu.refuse = true;
  ASSERT_TRUE(shm.Register("r", object.key(), 0, page).ok());
  EXPECT_EQ(shm.pinned_bytes(), page);
  EXPECT_FALSE(shm.Find("r", 0, 52)->View(DType::kF32, {1, 13}).defined());
  gpu.refuse = false;
  shm.SetPinning(&gpu, 0);  // no limit: nothing is locked, nothing viewed
  ASSERT_TRUE(shm.Register("s", object.key(), 0, page).ok());
  EXPECT_EQ(gpu.locked.size(), 2u);
  EXPECT_FALSE(shm.Find("s", 0, 52)->View(DType::kF32, {1, 13}).defined());
  EXPECT_TRUE(shm.Find("q", 0, 52)->View(DType::kF32, {1, 13}).defined()) << "a region locked before still is";

  {  // Truncated: the next check fails the requests that read "q" in place, though nothing faulted.
    auto q = shm.Find("q", 0, 64);
    ASSERT_TRUE(q.ok());
    std::vector<SharedMemoryRegions::Use> read_in_place = {*q};
    ASSERT_TRUE(CheckSharedMemoryInputs(read_in_place).ok());
    const int fd = shm_open(object.key().c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(2 * page)), 0);
    close(fd);
    Status checked = CheckSharedMemoryInputs(read_in_place);
    EXPECT_EQ(checked.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(checked.message().find("was truncated after it was registered"), std::string::npos) << checked.ToString();
  }
  ASSERT_TRUE(shm.Unregister(SharedMemoryRegions::Kind::kSystem, "").ok());
  EXPECT_EQ(*gpu.live, 0);
  EXPECT_EQ(shm.pinned_bytes(), 0u);
}

// CUDA regions: refused with the reason where there is no GPU; on a GPU, handles the driver
// cannot open are refused (a real handle from another process: tests/cuda_shared_memory_test.py).
TEST(SharedMemoryRegions, CudaRegistrationsRefuseWhatCannotBeOpened) {
  SharedMemoryRegions shm;
  SharedObject object(64);
  ASSERT_TRUE(shm.Register("s", object.key(), 0, 64).ok());
  const std::string handle(64, '\x01');
  EXPECT_FALSE(shm.RegisterCuda("s", handle, 0, 64).ok());  // a system region's name
  EXPECT_EQ(shm.RegisterCuda("c", handle, -1, 64).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shm.RegisterCuda("c", handle, 0, 0).code(), StatusCode::kInvalidArgument);
  const bool gpu = FindBackend("cuda", 0).ok();
  Status short_handle = shm.RegisterCuda("c", "abc", 0, 64);
  Status garbage = shm.RegisterCuda("c", handle, 0, 64);
  for (const Status& s : {short_handle, garbage}) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("CUDA shared memory region 'c'"), std::string::npos) << s.ToString();
    if (gpu) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    }
  }
  if (gpu) {
    EXPECT_NE(short_handle.message().find("a CUDA IPC handle has 64"), std::string::npos) << short_handle.ToString();
  }
  EXPECT_TRUE(shm.List(SharedMemoryRegions::Kind::kCuda, "")->empty());
}

// A region whose reads wait (as a CUDA region's copies do), its bytes in host memory, counting
// how it is read.
class WaitingRegion final : public SharedMemoryRegions::Region {
 public:
  explicit WaitingRegion(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  SharedMemoryRegions::Kind kind() const override { return SharedMemoryRegions::Kind::kCuda; }
  SharedMemoryRegions::RegionStatus status(const std::string& name) const override { return {name, "", 0, 0, 0}; }
  uint64_t byte_size() const override { return bytes_.size(); }
  Status Read(uint64_t at, void* dst, size_t bytes) const override {
    ++reads;
    std::memcpy(dst, bytes_.data() + at, bytes);
    return Status::Ok();
  }
  Status Write(uint64_t, const void*, size_t) const override { return Unimplemented("read only"); }
  bool reads_wait() const override { return true; }
  Status ReadMany(std::span<const SharedDeviceMemory::Piece> pieces) const override {
    batches.emplace_back();
    for (const auto& p : pieces) {
      batches.back().push_back(p.offset);
      std::memcpy(p.dst, bytes_.data() + p.offset, p.bytes);
    }
    return fail_next ? Internal("the copy failed") : Status::Ok();
  }
  mutable int reads = 0;
  mutable std::vector<std::vector<uint64_t>> batches;  // each ReadMany's offsets
  bool fail_next = false;

 private:
  std::vector<uint8_t> bytes_;
};

TEST(SharedMemoryReads, ARegionWhoseReadsWaitIsReadOnceAtFinishAndOthersAtOnce) {
  std::vector<uint8_t> a_bytes(64), b_bytes(64);
  for (size_t i = 0; i < 64; ++i) a_bytes[i] = static_cast<uint8_t>(i), b_bytes[i] = static_cast<uint8_t>(100 + i);
  auto a = std::make_shared<WaitingRegion>(a_bytes);
  auto b = std::make_shared<WaitingRegion>(b_bytes);
  SharedMemoryRegions shm;
  SharedObject object(64);
  ASSERT_TRUE(shm.Register("sys", object.key(), 0, 64).ok());
  auto sys = shm.Find("sys", 8, 4);
  ASSERT_TRUE(sys.ok());
  ASSERT_EQ(sys->Write("\x07\x08\x09\x0a", 4).code(), StatusCode::kOk);

  SharedMemoryReads reads;
  uint8_t got[5][4] = {};
  const SharedMemoryRegions::Use uses[] = {{a, 0, 4}, {b, 16, 4}, {a, 32, 4}, *sys, {a, 60, 4}};
  uint8_t* dst[] = {got[0], got[1], got[2], got[3], got[4]};
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(reads.Read(uses[i], dst[i]).ok());
  // The system region's bytes are there at once; the waiting regions' not yet, and not read one by one.
  EXPECT_EQ(std::vector<uint8_t>(got[3], got[3] + 4), (std::vector<uint8_t>{7, 8, 9, 10}));
  EXPECT_EQ(std::vector<uint8_t>(got[0], got[0] + 4), (std::vector<uint8_t>{0, 0, 0, 0}));
  EXPECT_TRUE(a->batches.empty());
  ASSERT_TRUE(reads.Finish().ok());
  // One batch a region, in the order asked, and each byte where it was asked for.
  EXPECT_EQ(a->batches, (std::vector<std::vector<uint64_t>>{{0, 32, 60}}));
  EXPECT_EQ(b->batches, (std::vector<std::vector<uint64_t>>{{16}}));
  EXPECT_EQ(a->reads + b->reads, 0);
  EXPECT_EQ(std::vector<uint8_t>(got[0], got[0] + 4), (std::vector<uint8_t>{0, 1, 2, 3}));
  EXPECT_EQ(std::vector<uint8_t>(got[1], got[1] + 4), (std::vector<uint8_t>{116, 117, 118, 119}));
  EXPECT_EQ(std::vector<uint8_t>(got[2], got[2] + 4), (std::vector<uint8_t>{32, 33, 34, 35}));
  EXPECT_EQ(std::vector<uint8_t>(got[4], got[4] + 4), (std::vector<uint8_t>{60, 61, 62, 63}));
  ASSERT_TRUE(reads.Finish().ok());  // nothing left to read
  EXPECT_EQ(a->batches.size(), 1u);

  // A region's failure is Finish's error.
  b->fail_next = true;
  ASSERT_TRUE(reads.Read({b, 0, 4}, got[0]).ok());
  EXPECT_EQ(reads.Finish().code(), StatusCode::kInternal);
}

TEST(Base64, DecodesPaddedStandardBase64AndRefusesTheRest) {
  EXPECT_EQ(DecodeBase64(""), "");
  EXPECT_EQ(DecodeBase64("Zg=="), "f");
  EXPECT_EQ(DecodeBase64("Zm8="), "fo");
  EXPECT_EQ(DecodeBase64("Zm9v"), "foo");
  EXPECT_EQ(DecodeBase64("Zm9vYmFy"), "foobar");  // RFC 4648's test vectors
  EXPECT_EQ(DecodeBase64("AP8A/w=="), std::string("\x00\xff\x00\xff", 4));
  for (const char* bad : {"Zg", "Zg=", "Z===", "Zm9v!mFy", "Zg==Zg==", "=Zg="}) {
    EXPECT_FALSE(DecodeBase64(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace rankd
