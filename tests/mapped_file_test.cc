// MappedFile: a model's external-data file replaced or truncated on disk neither crashes the process
// nor changes what a loaded model reads without saying so.
#include "model/mapped_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "test_util.h"

namespace rankd {
namespace {

namespace fs = std::filesystem;

std::string WriteBytes(const std::string& name, size_t size, char fill) {
  return testing::WriteTempFile("mapped/" + name, std::string(size, fill));
}

uint64_t SumPages(const MappedFile& f) {
  uint64_t sum = 0;
  for (size_t i = 0; i < f.size(); i += 512) sum += f.data()[i];
  return sum;
}

TEST(MappedFile, UnchangedFileChecksOk) {
  std::string path = WriteBytes("same", 1 << 16, 'a');
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->size(), size_t{1} << 16);
  EXPECT_EQ((*f)->data()[100], 'a');
  EXPECT_TRUE((*f)->Check().ok());
  EXPECT_EQ(MappedFile::Open(path + ".missing").status().code(), StatusCode::kNotFound);
}

// A GPU backend copies what lies in a mapped file rather than page-locking it (model_resources.cc).
TEST(MappedFile, KnowsWhichMemoryItMaps) {
  auto f = MappedFile::Open(WriteBytes("overlaps", 1 << 16, 'o'));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const uint8_t* data = (*f)->data();
  EXPECT_TRUE(MappedFile::Overlaps(data, 1));
  EXPECT_TRUE(MappedFile::Overlaps(data + 1000, 64));
  EXPECT_TRUE(MappedFile::Overlaps(data - 16, 17));  // its last byte is the mapping's first
  EXPECT_FALSE(MappedFile::Overlaps(data - 16, 16));
  EXPECT_FALSE(MappedFile::Overlaps(data + (1 << 16), 8));
  std::vector<uint8_t> heap(4096);
  EXPECT_FALSE(MappedFile::Overlaps(heap.data(), heap.size()));
  f->reset();
  EXPECT_FALSE(MappedFile::Overlaps(data, 1));
}

TEST(MappedFile, RewrittenInPlaceAtTheSameSizeFailsCheck) {
  std::string path = WriteBytes("rewritten", 1 << 16, 'a');
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok());
  usleep(20000);  // a later modification time, whatever the file system's granularity
  std::ofstream(path, std::ios::binary | std::ios::in | std::ios::out) << std::string(1 << 16, 'b');
  Status s = (*f)->Check();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("changed on disk"), std::string::npos) << s.message();
}

TEST(MappedFile, TruncatedUnderTheMappingReadsZerosAndFailsCheck) {
  std::string path = WriteBytes("truncated", 1 << 20, 'a');
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(SumPages(**f), uint64_t{'a'} * ((1 << 20) / 512));
  fs::resize_file(path, 0);      // what `cp new old` does first: pages past the end now raise SIGBUS
  EXPECT_EQ(SumPages(**f), 0u);  // read through the handler's zero pages, the process lives
  Status s = (*f)->Check();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  // Another mapping is unaffected.
  auto other = MappedFile::Open(WriteBytes("other", 4096, 'c'));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->data()[4095], 'c');
  EXPECT_TRUE((*other)->Check().ok());
}

TEST(MappedFile, ReplacedByRenameKeepsTheLoadedBytes) {
  std::string path = WriteBytes("renamed", 1 << 16, 'a');
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok());
  std::string fresh = WriteBytes("renamed.new", 1 << 12, 'z');
  fs::rename(fresh, path);
  EXPECT_EQ((*f)->data()[60000], 'a');
  EXPECT_TRUE((*f)->Check().ok());
}

TEST(MappedFileDeathTest, SigbusOutsideAMappedTableStillKills) {
  // The handler passes faults it does not own on: a SIGBUS elsewhere is not swallowed.
  std::string path = WriteBytes("unregistered", 1 << 16, 'a');
  auto f = MappedFile::Open(path);  // installs the handler
  ASSERT_TRUE(f.ok());
  EXPECT_DEATH(
      {
        int fd = ::open(path.c_str(), O_RDONLY);
        void* p = ::mmap(nullptr, 1 << 16, PROT_READ, MAP_PRIVATE, fd, 0);
        (void)::ftruncate(::open(path.c_str(), O_WRONLY), 0);
        volatile char c = static_cast<const char*>(p)[8192];
        (void)c;
      },
      "");
}

}  // namespace
}  // namespace rankd
