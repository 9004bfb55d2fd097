// DiskTables: a model's tables kept on disk (tier `disk`, docs/embedding.md, "Tables on disk"),
// and the rows each run needs fetched from them before it runs.
//
// A table on disk is no longer a constant of the graph: Open turns it into a graph input, appended
// after the request's, that holds only the rows a run reads. Before each run, Stage reads the ids
// its lookups of that table would read, fetches each distinct row once through the table's host
// cache (embedding/cached_row_file.h: a host budget of hot rows over io_uring reads of the file),
// packs them into that input, and gives the lookups copies of their ids rewritten to the rows'
// places in it. The kernels are those of any table: on a GPU the rows arrive with the other
// inputs in one copy and are read from device memory. Every id reads the file's row for it;
// nothing defaults, and an id outside the table fails the run as it would on the device.
//
// A table may go to disk when every reader of its ids is a lookup of it: its ids are a graph input
// (or columns of one) that nothing else reads, so rewriting them changes nothing else. Its rows come
// from the external-data file the table was loaded from (read through the descriptor the load
// opened, so replacing the file on disk changes nothing), or, for a table the load holds in memory
// (inline in the model, or rewritten by the load passes: BF16 storage, tables merged), from a copy
// written once into `directory`, unlinked at once (it goes when the model does).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "backend/row_slots.h"
#include "common/latency_histogram.h"
#include "common/mutex.h"
#include "embedding/cached_row_file.h"
#include "embedding/gpu_row_tier.h"
#include "embedding/host_cache_hotness.h"
#include "embedding/table_budget.h"
#include "model/graph.h"
#include "model/ops/op_schema.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

struct DiskTablesOptions {
  // Where tables the load holds in memory are written (tables.disk_dir); empty: such a table is a
  // load error.
  std::string directory;
  // Host memory for the tables' rows, shared in proportion to their bytes (tables.disk_cache_mb);
  // -1: a tenth of their bytes. Each table gets at least one row.
  int64_t cache_bytes = -1;
  // Where the host caches' rows are saved and the next load starts warm from
  // (embedding/host_cache_hotness.h; the model's tables.hotness_snapshot with ".disk" added), with
  // the rows of their GPU caches; empty: the caches start cold.
  std::string snapshot_path;
  double save_every_s = 300;  // how often the snapshot is saved while the caches change
  // Device slots for the GPU cache of a table on disk (TableInfo::cache_rows > 0: a GPU cache in
  // front of its host cache, embedding/gpu_row_tier.h); null where the backend has no device (the
  // cache is then ignored, as a cached table's is on the host).
  std::function<StatusOr<std::unique_ptr<RowSlots>>(int64_t slots, int64_t row_bytes)> make_slots;
  bool gpu_keeper = true;  // the GPU caches' keeper thread; off: KeepGpuCaches by hand (tests)
};

// A run's graph inputs, the rows of its tables on disk staged. `hold` keeps every GPU cache's rows
// where the run saw them (it is inside their GpuRowTier::readers): keep it until the run's kernels
// are done.
struct StagedRun {
  std::vector<Tensor> inputs;
  std::shared_ptr<void> hold;
};

// One table on disk, as `rankd inspect` and /metrics show it.
struct DiskTableStats {
  std::string table;
  std::string file;         // the file its rows are read from
  bool direct = false;      // read with O_DIRECT (else through the page cache)
  int64_t capacity = 0;     // rows its host cache holds at most
  int64_t cached = 0;       // rows it holds now
  uint64_t host_bytes = 0;  // host memory of its cache: the rows' and the policy's
  uint64_t lookups = 0;     // distinct rows runs asked for
  uint64_t hits = 0;        // of those, served by the host cache
  uint64_t rows_read = 0;   // rows read from the file (by runs and by the warm start)
  uint64_t bytes_read = 0;
  uint64_t inserted = 0, evicted = 0;
  uint64_t warmed = 0;     // rows moved in from the hotness snapshot at load
  LatencyHistogram reads;  // each read of a run's misses from the file (its shards' summed)
  bool gpu_cache = false;  // a GPU cache in front of the host cache: `gpu` holds its figures
  GpuRowTierStats gpu;
};

class DiskTables {
 public:
  // Moves the tables `tables` places on TableTier::kDisk out of `graph` (as above). Errors name the
  // table: ids that something other than its lookups reads or that the graph computes, a Gather
  // that clips its ids above zero, a table held in memory with no directory to write it to, a file
  // that cannot be opened or written.
  static StatusOr<std::unique_ptr<DiskTables>> Open(Graph& graph, const std::vector<TableInfo>& tables,
                                                    const DiskTablesOptions& options);
  // OK when `table` may go on disk (its lookups' ids as above); else Open's error for it.
  static Status CanServe(const Graph& graph, const TableInfo& table);
  // OK when a table on disk may have a GPU cache in front of it: rows of whole 16-byte units, and
  // every lookup of it a bag part of a ConcatEmbeddingBags (whose kernel reads encoded ids:
  // GpuRowTier), none a Gather nor a column of ids; else an error naming the node or the rows.
  static Status CanCacheOnGpu(const Graph& graph, const TableInfo& table);
  // The GPU caches' slots by the graph input holding their table's staged rows (PrepareOptions::
  // staged_row_slots).
  std::map<size_t, const void*> gpu_row_slots() const;
  ~DiskTables();
  DiskTables(const DiskTables&) = delete;
  DiskTables& operator=(const DiskTables&) = delete;

  // The graph inputs before the first table's rows (the request's).
  size_t request_inputs() const { return request_inputs_; }
  // Appends the metas of the tables' rows for request inputs of `metas`' shapes: each [as many
  // rows as the table's ids there, its width].
  void AppendMetas(std::vector<TensorMeta>& metas) const;
  // The graph's inputs for the request inputs `inputs`: those the lookups of tables on disk read
  // rewritten (copies), the others as given, then each table's rows, `rows[t]` rows (the plan's).
  // A row a table's GPU cache holds is not staged: its ids name its slot (GpuRowTier::Encode).
  StatusOr<StagedRun> Stage(std::span<const Tensor> inputs, std::span<const int64_t> rows) const;
  std::vector<DiskTableStats> stats() const;
  // Each GPU cache's keeper step now (GpuRowTier::Keep): what the keeper thread does every
  // kKeepEvery; for tables opened without it (tests).
  Status KeepGpuCaches() const;
  // Waits until the host caches' warm start from the snapshot has moved in what it will, and the
  // keeper thread has moved the GPU caches' saved rows in (at once without a snapshot).
  void WaitForWarmStart() const;

 private:
  struct Table;
  // One shard of one table's host cache in a run: the distinct rows the run reads there (in order of
  // first use), their places in the table's staged rows from `first` on, and the ids that name them.
  struct ShardRun {
    size_t table = 0, shard = 0;
    Status status;
    std::vector<int64_t> rows;  // the distinct rows read here (not those a GPU cache holds)
    // With a GPU cache, per distinct row in order of first use: its place among `rows`, or the id
    // naming its slot (below -1). Empty without one (the distinct rows are `rows`).
    std::vector<int64_t> codes;
    struct At {
      size_t source = 0;    // the table's IdSource
      int64_t element = 0;  // the id's element in that input
      int64_t row = 0;      // the table row it names
      int32_t local = 0;    // that row's place among `rows`
    };
    std::vector<At> at;
    int64_t first = 0;
  };
  DiskTables() = default;
  // Every id a table's lookups read in `inputs`, checked and handed to its shard's run (`runs`:
  // the table's, one per shard in order); an id out of range fails the first.
  void SplitIds(std::span<ShardRun> runs, std::span<const Tensor> inputs) const;
  // The distinct rows among a shard run's ids, and each id's place among them (with a GPU cache,
  // those it holds set apart and offered to its policy with the others).
  void FindRows(ShardRun& run) const;
  // Rewrites those ids in `inputs` (the run's copies) to the rows' places and reads the rows into
  // `staged`, the table's rows.
  void ReadRows(ShardRun& run, std::span<Tensor> inputs, Tensor& staged) const;

  // Staged rows' memory, kept from run to run (a fresh allocation's page faults cost a W1 request
  // of 500 pairs more than its rows' copying); shared with the tensors that view it.
  struct Buffers;
  // A [rows, width] tensor of `dtype`: where a GPU's pinned pool is installed (common/host_allocator.h),
  // a request tensor from it, which the GPU reads in place (the pool keeps its blocks mapped); else
  // over a buffer from `buffers_`, given back when the tensor goes.
  Tensor StagedRows(DType dtype, int64_t rows, int64_t width) const;

  // The GPU caches' keeper: one thread for them all, a step every kKeepEvery while it has caches.
  void KeepLoop();
  static constexpr std::chrono::milliseconds kKeepEvery{20};

  size_t request_inputs_ = 0;
  std::vector<std::unique_ptr<Table>> tables_;
  Mutex keeper_mu_;
  std::condition_variable keeper_stop_;
  bool stopping_ RANKD_GUARDED_BY(keeper_mu_) = false;
  std::thread keeper_;  // stopped first by the destructor, while the tables it keeps live
  std::shared_ptr<Buffers> buffers_;
  std::unique_ptr<HostCacheHotness> hotness_;  // goes before the tables' caches it reads
};

}  // namespace rankd
