// rankd bench disk: a table's rows read from a file on disk in batches (embedding/row_file.h), with
// or without a host cache in front (embedding/cached_row_file.h), against the disk's own ceiling
// measured in the same command: random single-block reads with as many in flight as the ring holds.
// Bytes the device read come from /proc/diskstats where the file's device is listed there.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedding/access_trace.h"
#include "embedding/cached_row_file.h"
#include "embedding/row_file.h"
#include "tools/commands.h"

namespace rankd {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes the block device holding `path` has read so far (its /proc/diskstats line, sectors of 512
// bytes); -1 where the file's device is not listed (an overlay, tmpfs).
int64_t DeviceBytesRead(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1;
  std::ifstream stats("/proc/diskstats");
  std::string line;
  while (std::getline(stats, line)) {
    std::istringstream in(line);
    unsigned major_no = 0, minor_no = 0;
    std::string name;
    uint64_t reads = 0, merged = 0, sectors = 0;
    if (!(in >> major_no >> minor_no >> name >> reads >> merged >> sectors)) continue;
    if (major_no == major(st.st_dev) && minor_no == minor(st.st_dev)) return static_cast<int64_t>(sectors * 512);
  }
  return -1;
}

// Writes `mb` MiB of random bytes to `path` (real data: a sparse file would read without the disk).
Status CreateFile(const std::string& path, int64_t mb) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Unavailable("cannot write '" + path + "'");
  std::mt19937_64 rng(1);
  std::vector<uint64_t> chunk((size_t{1} << 20) / sizeof(uint64_t));
  for (int64_t i = 0; i < mb; ++i) {
    for (auto& x : chunk) x = rng();
    out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(chunk.size() * 8));
  }
  out.flush();
  return out ? Status::Ok() : Unavailable("writing '" + path + "' failed");
}

struct Phase {
  int64_t batches = 0, rows = 0;
  double seconds = 0, p50_ms = 0, p99_ms = 0;
  int64_t device_bytes = -1;
};

// Batches of `batch` ids from `draw` for `seconds`, each read through `read`.
template <typename Draw, typename Read>
StatusOr<Phase> Run(const std::string& path, double seconds, size_t batch, Draw&& draw, Read&& read, size_t row_bytes) {
  std::vector<int64_t> ids(batch);
  std::vector<uint8_t> out(batch * row_bytes);
  std::vector<double> ms;
  Phase phase;
  const int64_t device_before = DeviceBytesRead(path);
  const auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    for (auto& id : ids) id = draw();
    const auto t0 = Clock::now();
    RANKD_RETURN_IF_ERROR(read(ids, out.data()));
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    ++phase.batches;
    phase.rows += static_cast<int64_t>(batch);
  }
  phase.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(ms.begin(), ms.end());
  phase.p50_ms = ms[ms.size() / 2];
  phase.p99_ms = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  const int64_t device_after = DeviceBytesRead(path);
  if (device_before >= 0 && device_after >= 0) phase.device_bytes = device_after - device_before;
  return phase;
}

double PerSecond(double x, const Phase& p) { return p.seconds > 0 ? x / p.seconds : 0; }

}  // namespace

int BenchDiskCommand(const BenchDiskArgs& args) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "rankd bench disk: %s\n", s.ToString().c_str());
    return 2;
  };
  if (args.create_mb > 0) {
    if (Status s = CreateFile(args.file, args.create_mb); !s.ok()) return fail(s);
  }
  struct stat st {};
  if (stat(args.file.c_str(), &st) != 0) return fail(NotFound("no file '" + args.file + "' (--create-mb writes one)"));
  RowFileOptions options;
  options.queue_depth = args.queue_depth;
  nlohmann::json out = {{"command", args.command_line}, {"file", args.file}, {"file_bytes", st.st_size}};

  // The ceiling: random blocks, one read each, the ring full.
  const int64_t blocks = st.st_size / static_cast<int64_t>(RowFile::kAlign);
  auto block_file = RowFile::Open(args.file, 0, blocks, RowFile::kAlign, options);
  if (!block_file.ok()) return fail(block_file.status());
  std::mt19937_64 rng(args.seed);
  std::uniform_int_distribution<int64_t> any_block(0, std::max<int64_t>(blocks - 1, 0));
  const size_t ceiling_batch = static_cast<size_t>(4 * args.queue_depth);
  auto ceiling = Run(
      args.file, args.seconds / 2, ceiling_batch, [&] { return any_block(rng); },
      [&](std::span<const int64_t> ids, void* to) { return (*block_file)->Read(ids, to); }, RowFile::kAlign);
  if (!ceiling.ok()) return fail(ceiling.status());
  const double reads = static_cast<double>((*block_file)->stats().reads);
  std::printf("file %s: %lld MiB, direct reads: %s\n", args.file.c_str(), static_cast<long long>(st.st_size >> 20),
              (*block_file)->direct() ? "yes" : "no (the filesystem refused O_DIRECT: the page cache serves)");
  std::printf(
      "disk ceiling: random %zu-byte reads, %d in flight: %.0f reads/s, %.1f MB/s, batches of %zu p50 %.3f ms\n",
      RowFile::kAlign, args.queue_depth, PerSecond(reads, *ceiling), PerSecond(reads * RowFile::kAlign, *ceiling) / 1e6,
      ceiling_batch, ceiling->p50_ms);
  out["direct"] = (*block_file)->direct();
  out["ceiling"] = {{"reads_per_second", PerSecond(reads, *ceiling)},
                    {"mb_per_second", PerSecond(reads * RowFile::kAlign, *ceiling) / 1e6},
                    {"device_bytes", ceiling->device_bytes}};
  block_file->reset();

  // The rows: batches of ids (uniform or Zipf), straight from the file or through a host cache.
  const int64_t rows = st.st_size / static_cast<int64_t>(args.row_bytes);
  auto file = RowFile::Open(args.file, 0, rows, args.row_bytes, options);
  if (!file.ok()) return fail(file.status());
  std::unique_ptr<CachedRowFile> cached;
  RowFile* plain = file->get();
  if (args.cache_rows > 0) {
    auto made = CachedRowFile::Create(std::move(*file), args.cache_rows);
    if (!made.ok()) return fail(made.status());
    cached = std::move(*made);
  }
  std::optional<ZipfSampler> zipf;
  if (args.zipf > 0) zipf.emplace(rows, args.zipf);
  std::uniform_int_distribution<int64_t> any_row(0, rows - 1);
  // Zipf ranks spread over the file, so hot rows are not neighbours.
  auto draw = [&] { return zipf ? ((*zipf)(rng)-1) * 2654435761LL % rows : any_row(rng); };
  auto read = [&](std::span<const int64_t> ids, void* to) {
    return cached ? cached->Read(ids, to) : plain->Read(ids, to);
  };
  auto phase = Run(args.file, args.seconds, static_cast<size_t>(args.batch), draw, read, args.row_bytes);
  if (!phase.ok()) return fail(phase.status());
  const RowFileStats fs = cached ? cached->file().stats() : plain->stats();
  char zipf_text[32];
  std::snprintf(zipf_text, sizeof(zipf_text), "Zipf %.3g", args.zipf);
  const std::string ids_kind = zipf ? zipf_text : "uniform";
  const double hit_ratio = cached && cached->stats().lookups ? static_cast<double>(cached->stats().hits) /
                                                                   static_cast<double>(cached->stats().lookups)
                                                             : 0;
  std::printf(
      "rows: %lld of %zu bytes, %s ids, batches of %lld, host cache %lld rows: %.0f rows/s (%.1f MB/s of rows), "
      "%.1f MB/s read from the file, batch p50 %.3f p99 %.3f ms, host cache hit ratio %.3f, device read %s\n",
      static_cast<long long>(rows), args.row_bytes, ids_kind.c_str(), static_cast<long long>(args.batch),
      static_cast<long long>(args.cache_rows), PerSecond(static_cast<double>(phase->rows), *phase),
      PerSecond(static_cast<double>(phase->rows * static_cast<int64_t>(args.row_bytes)), *phase) / 1e6,
      PerSecond(static_cast<double>(fs.bytes_read), *phase) / 1e6, phase->p50_ms, phase->p99_ms, hit_ratio,
      phase->device_bytes >= 0 ? (std::to_string(phase->device_bytes >> 20) + " MiB").c_str()
                               : "not listed in /proc/diskstats");
  out["rows"] = {{"row_bytes", args.row_bytes},
                 {"zipf", args.zipf},
                 {"batch", args.batch},
                 {"cache_rows", args.cache_rows},
                 {"rows_per_second", PerSecond(static_cast<double>(phase->rows), *phase)},
                 {"file_mb_per_second", PerSecond(static_cast<double>(fs.bytes_read), *phase) / 1e6},
                 {"batch_p50_ms", phase->p50_ms},
                 {"batch_p99_ms", phase->p99_ms},
                 {"host_cache_hit_ratio", hit_ratio},
                 {"device_bytes", phase->device_bytes}};
  if (!args.json_path.empty()) std::ofstream(args.json_path) << out.dump(1) << "\n";
  return 0;
}

}  // namespace rankd
