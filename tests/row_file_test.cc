// A table's rows read from a file in batches (embedding/row_file.h): every row as the file holds
// it, whatever the ids' order, repeats and alignment, and clear errors for ids past the table and
// for a file cut short or replaced after it was opened.
#include "embedding/row_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

namespace rankd {
namespace {

namespace fs = std::filesystem;

// A file of `bytes` random bytes in the build tree (a disk filesystem, so reads go direct where it
// allows them), removed at the end.
class TempFile {
 public:
  TempFile(size_t bytes, uint64_t seed)
      : path_(fs::current_path() /
              ("row_file_test_" + std::to_string(getpid()) + "_" + std::to_string(seed) + ".bin")) {
    std::mt19937_64 rng(seed);
    bytes_.resize(bytes);
    for (auto& b : bytes_) b = static_cast<char>(rng());
    Write(bytes_);
  }
  ~TempFile() { fs::remove(path_); }
  void Write(const std::string& bytes) const {
    std::ofstream(path_, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const std::string& bytes() const { return bytes_; }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
  std::string bytes_;
};

// Reads `ids` and checks each row against the file's bytes.
void ExpectRows(RowFile& file, const std::string& bytes, int64_t offset, const std::vector<int64_t>& ids) {
  std::vector<char> out(ids.size() * file.row_bytes());
  ASSERT_TRUE(file.Read(ids, out.data()).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t at = static_cast<size_t>(offset) + static_cast<size_t>(ids[i]) * file.row_bytes();
    ASSERT_EQ(0, std::memcmp(out.data() + i * file.row_bytes(), bytes.data() + at, file.row_bytes()))
        << "row " << ids[i] << " (batch position " << i << ")";
  }
}

TEST(RowFile, ReadsEveryRowAsTheFileHoldsIt) {
  // Rows of 100 bytes from byte 37: rows straddle the 4 KiB blocks reads are aligned to.
  const int64_t rows = 5000, offset = 37;
  const size_t row_bytes = 100;
  TempFile f(offset + rows * row_bytes + 11, 1);
  RowFileOptions options;
  options.queue_depth = 8;  // batches larger than the ring
  auto file = RowFile::Open(f.path(), offset, rows, row_bytes, options);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::printf("direct reads: %s\n", (*file)->direct() ? "yes" : "no (the filesystem refused O_DIRECT)");
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> any(0, rows - 1);
  for (size_t batch : {1, 2, 17, 300, 4000}) {
    std::vector<int64_t> ids(batch);
    for (auto& id : ids) id = any(rng);
    ExpectRows(**file, f.bytes(), offset, ids);
  }
  ExpectRows(**file, f.bytes(), offset, {0, rows - 1, 0, 41, 40, 42, rows - 1});  // ends, repeats, neighbours
  ExpectRows(**file, f.bytes(), offset, {});
  const RowFileStats stats = (*file)->stats();
  EXPECT_EQ(stats.batches, 6u);
  EXPECT_EQ(stats.rows, 1u + 2 + 17 + 300 + 4000 + 7);
  EXPECT_GT(stats.reads, 0u);
  EXPECT_LT(stats.reads, stats.rows);  // neighbouring rows share reads
  EXPECT_GT(stats.bytes_read, 0u);
  EXPECT_LE(stats.bytes_read, stats.reads * RowFileOptions{}.max_read_bytes);  // whole blocks, the file's end short
}

TEST(RowFile, LargeRowsAndSmallReadLimits) {
  // Rows larger than a block, reads limited to two blocks: a row may need a read of its own.
  const int64_t rows = 64;
  const size_t row_bytes = 3 * RowFile::kAlign + 5;
  TempFile f(rows * row_bytes, 2);
  RowFileOptions options;
  options.max_read_bytes = 2 * RowFile::kAlign;
  options.queue_depth = 3;
  auto file = RowFile::Open(f.path(), 0, rows, row_bytes, options);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ExpectRows(**file, f.bytes(), 0, {63, 0, 1, 2, 31, 30, 32, 63});
  options.direct = false;  // through the page cache, as on a filesystem that refuses O_DIRECT
  auto cached = RowFile::Open(f.path(), 0, rows, row_bytes, options);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_FALSE((*cached)->direct());
  ExpectRows(**cached, f.bytes(), 0, {63, 0, 1, 2, 31, 30, 32, 63});
}

TEST(RowFile, ThreadsReadAtOnce) {
  const int64_t rows = 2000;
  const size_t row_bytes = 64;
  TempFile f(rows * row_bytes, 3);
  auto file = RowFile::Open(f.path(), 0, rows, row_bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      std::uniform_int_distribution<int64_t> any(0, rows - 1);
      for (int b = 0; b < 50; ++b) {
        std::vector<int64_t> ids(64);
        for (auto& id : ids) id = any(rng);
        ExpectRows(**file, f.bytes(), 0, ids);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ((*file)->stats().batches, 200u);
}

TEST(RowFile, BadOpensAndIdsAreClearErrors) {
  TempFile f(1000, 4);
  auto absent = RowFile::Open(f.path() + ".absent", 0, 1, 8);
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  auto shorter = RowFile::Open(f.path(), 8, 100, 10);  // 1,008 bytes needed
  ASSERT_FALSE(shorter.ok());
  EXPECT_EQ(shorter.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shorter.status().message().find("holds 1000 bytes"), std::string::npos) << shorter.status().ToString();
  EXPECT_FALSE(RowFile::Open(f.path(), 0, 10, 0).ok());
  auto file = RowFile::Open(f.path(), 0, 100, 10);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::vector<char> out(20);
  for (int64_t bad : {int64_t{-1}, int64_t{100}, int64_t{1} << 40}) {
    std::vector<int64_t> ids = {3, bad};
    Status s = (*file)->Read(ids, out.data());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("outside its 100 rows"), std::string::npos) << s.ToString();
  }
  ExpectRows(**file, f.bytes(), 0, {3, 99});  // still reads
}

TEST(RowFile, AFileCutShortFailsTheRowsPastItsEndAndAReplacedOneIsReadAsOpened) {
  const int64_t rows = 4000;
  const size_t row_bytes = 32;  // 128,000 bytes: 31.25 blocks
  TempFile f(rows * row_bytes, 5);
  auto file = RowFile::Open(f.path(), 0, rows, row_bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  // Replaced: a new file renamed over the path; the open one is still read, the old bytes.
  const std::string other = f.path() + ".new";
  std::ofstream(other, std::ios::binary).write(std::string(rows * row_bytes, 'x').data(), rows * row_bytes);
  fs::rename(other, f.path());
  ExpectRows(**file, f.bytes(), 0, {0, 1999, 3999});
  // Cut short in place: a fresh handle on the path, truncated to 1,000 rows' bytes plus a part row.
  auto cut = RowFile::Open(f.path(), 0, rows, row_bytes);
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  fs::resize_file(f.path(), 1000 * row_bytes + 7);
  std::vector<char> out(2 * row_bytes);
  std::vector<int64_t> ids = {10, 3000};
  Status s = (*cut)->Read(ids, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("ends before row 3000"), std::string::npos) << s.ToString();
  ids = {10, 999};
  ASSERT_TRUE((*cut)->Read(ids, out.data()).ok());  // the rows it still holds read as the file has them
  EXPECT_EQ(std::string(out.data(), row_bytes), std::string(row_bytes, 'x'));
}

}  // namespace
}  // namespace rankd
