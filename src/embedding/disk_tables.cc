#include "embedding/disk_tables.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>

#include "common/helping_pool.h"
#include "common/host_allocator.h"
#include "common/idle_priority.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/thread_name.h"
#include "embedding/lookups.h"
#include "embedding/row_places.h"
#include "model/mapped_file.h"

namespace rankd {

// One lookup's ids: graph input `input` (its column `column` of [rows, length] ids, or all of it),
// read as a bag reads them (a negative id an empty slot) or as a row Gather does (clipped to
// `floor`, a negative id counting from the table's end).
struct IdSource {
  size_t input = 0;
  int64_t column = -1;
  bool gather = false;
  int64_t floor = 0;
};

struct DiskTables::Buffers {
  static constexpr size_t kKept = 64;  // buffers kept for later runs at most
  struct Buffer {
    size_t bytes = 0;
    void* memory = nullptr;  // 64-byte aligned (std::aligned_alloc), as Tensor::Empty's
  };
  ~Buffers() {
    for (Buffer& b : free) std::free(b.memory);
  }
  Mutex mu;
  std::vector<Buffer> free RANKD_GUARDED_BY(mu);
};

struct DiskTables::Table {
  std::string name;
  DType dtype = DType::kInvalid;
  int64_t rows = 0, width = 0;
  std::vector<IdSource> sources;
  // The host cache in shards, each over its own descriptor of the file: shard RowShard(row) holds
  // and reads `row`, so a run's shards of one table are staged side by side.
  std::vector<std::unique_ptr<CachedRowFile>> shards;
  std::string file_name;            // for messages: the external-data file, or the copy written at load
  size_t input = 0;                 // the graph input holding a run's staged rows
  std::unique_ptr<GpuRowTier> gpu;  // a GPU cache in front of the host cache, where the table has one
};

namespace {

bool Overlap(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

std::string Errno() { return std::strerror(errno); }

// The lookups' id sources of table value `table`, checked: each a graph input (among the first
// `inputs`) that no other op, graph output or other table's lookup of the same ids reads.
StatusOr<std::vector<IdSource>> FindSources(const Graph& graph, int table, const std::string& name, size_t inputs) {
  const std::string why = "tables: table '" + name + "' cannot be on disk: ";
  std::vector<IdSource> sources;
  std::map<int, size_t> input_of;  // value id -> graph input index
  for (size_t i = 0; i < inputs; ++i) input_of[graph.inputs[i]] = i;
  for (const Node& n : graph.nodes) {
    for (const Lookup& l : NodeLookups(n)) {
      if (n.inputs[l.table_input] != table) continue;
      auto in = input_of.find(n.inputs[l.ids_input]);
      if (in == input_of.end()) return InvalidArgument(why + n.Describe() + " reads it with ids the graph computes");
      if (l.gather && l.floor > 0) return InvalidArgument(why + n.Describe() + " clips its ids above 0");
      IdSource s{in->second, l.column, l.gather, l.gather ? l.floor : 0};
      bool same = false;
      for (const IdSource& o : sources) {
        if (o.input != s.input || !Overlap(o.column, s.column)) continue;
        if (o.column != s.column || o.gather != s.gather || o.floor != s.floor) {
          return InvalidArgument(why + "its lookups read the same ids of input '" +
                                 graph.values[static_cast<size_t>(graph.inputs[s.input])].name + "' differently");
        }
        same = true;
      }
      if (!same) sources.push_back(s);
    }
  }
  // Every other reader of those ids: only lookups, of other columns where of another table.
  for (const IdSource& s : sources) {
    const int ids = graph.inputs[s.input];
    const std::string& ids_name = graph.values[static_cast<size_t>(ids)].name;
    if (std::find(graph.outputs.begin(), graph.outputs.end(), ids) != graph.outputs.end())
      return InvalidArgument(why + "its ids '" + ids_name + "' are a graph output");
    for (const Node& n : graph.nodes) {
      std::vector<const Lookup*> as_ids(n.inputs.size(), nullptr);
      const std::vector<Lookup> lookups = NodeLookups(n);
      for (const Lookup& l : lookups) as_ids[l.ids_input] = &l;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] != ids) continue;
        const Lookup* l = as_ids[i];
        if (!l) return InvalidArgument(why + "its ids '" + ids_name + "' are also read by " + n.Describe());
        if (n.inputs[l->table_input] != table && Overlap(l->column, s.column)) {
          return InvalidArgument(why + "its ids '" + ids_name + "' are also looked up in another table by " +
                                 n.Describe());
        }
      }
    }
  }
  if (sources.empty()) return InvalidArgument(why + "no lookup reads it");
  return sources;
}

// The external-data file `data` lies in, with its offset there; null when it lies in none.
const MappedFile* FileHolding(const Graph& graph, const void* data, size_t bytes, int64_t* offset) {
  const auto* at = static_cast<const uint8_t*>(data);
  for (const auto& f : graph.mapped_files) {
    if (at >= f->data() && at + bytes <= f->data() + f->size()) {
      *offset = at - f->data();
      return f.get();
    }
  }
  return nullptr;
}

// Writes `table` into a new file in `directory`; returns its path.
StatusOr<std::string> WriteRows(const std::string& directory, const std::string& name, const Tensor& table) {
  std::string safe = name;
  for (char& c : safe) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
  }
  std::string path = (std::filesystem::path(directory) / ("rankd-rows-" + safe + "-XXXXXX")).string();
  const int fd = mkstemp(path.data());
  if (fd < 0) return Unavailable("tables.disk_dir '" + directory + "': cannot create a file: " + Errno());
  const auto* from = static_cast<const uint8_t*>(table.raw());
  size_t done = 0;
  while (done < table.bytes()) {
    const ssize_t n = write(fd, from + done, table.bytes() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string error = Errno();
      close(fd);
      unlink(path.c_str());
      return Unavailable("tables.disk_dir '" + directory + "': writing table '" + name + "' failed: " + error);
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return path;
}

// Shards of a table's host cache: one below 8,192 rows of cache (tests size caches of one row), else 8.
constexpr int kShards = 8;
int ShardCount(int64_t cache_rows) { return cache_rows >= 1024 * kShards ? kShards : 1; }

// `count` host-cache shards over [offset, offset + rows * row_bytes) of `path`, `cache_rows` rows
// between them.
StatusOr<std::vector<std::unique_ptr<CachedRowFile>>> OpenShards(const std::string& path, int64_t offset, int64_t rows,
                                                                 size_t row_bytes, int64_t cache_rows) {
  const int count = ShardCount(cache_rows);
  std::vector<std::unique_ptr<CachedRowFile>> shards;
  for (int s = 0; s < count; ++s) {
    RANKD_ASSIGN_OR_RETURN(std::unique_ptr<RowFile> file, RowFile::Open(path, offset, rows, row_bytes));
    RANKD_ASSIGN_OR_RETURN(std::unique_ptr<CachedRowFile> shard,
                           CachedRowFile::Create(std::move(file), (cache_rows + count - 1) / count));
    shards.push_back(std::move(shard));
  }
  return shards;
}

}  // namespace

DiskTables::~DiskTables() {
  {
    MutexLock lock(keeper_mu_);
    stopping_ = true;
  }
  keeper_stop_.notify_all();
  if (keeper_.joinable()) keeper_.join();
}

void DiskTables::KeepLoop() {
  NameThisThread("rankd-cache");
  bool idle = false;
  for (;;) {
    {
      MutexLock lock(keeper_mu_);
      keeper_stop_.wait_for(lock.native(), kKeepEvery);
      if (stopping_) return;
    }
    const Status kept = KeepGpuCaches();
    if (!kept.ok()) LogWarning("a GPU cache of a table on disk: " + kept.ToString());
    // Once the caches are full their policies only swap rows: cores nothing else wants will do.
    if (!idle && std::all_of(tables_.begin(), tables_.end(), [](const auto& t) { return !t->gpu || t->gpu->full(); }))
      idle = RunAtIdlePriority();
  }
}

Status DiskTables::CanServe(const Graph& graph, const TableInfo& table) {
  return FindSources(graph, table.value, table.name, graph.inputs.size()).status();
}

Status DiskTables::CanCacheOnGpu(const Graph& graph, const TableInfo& table) {
  if (table.row_bytes() % GpuRowTier::kUnitBytes != 0) {
    return InvalidArgument("tables: table '" + table.name + "' on disk cannot have a GPU cache: its rows of " +
                           std::to_string(table.row_bytes()) + " bytes are not whole " +
                           std::to_string(GpuRowTier::kUnitBytes) + "-byte units");
  }
  for (const Node& n : graph.nodes) {
    for (const Lookup& l : NodeLookups(n)) {
      if (n.inputs[l.table_input] != table.value) continue;
      if (n.op != "ConcatEmbeddingBags" || l.gather || l.column >= 0) {
        return InvalidArgument("tables: table '" + table.name + "' on disk cannot have a GPU cache: " + n.Describe() +
                               " reads it (only the bags of a concatenation of embedding bags read a GPU cache "
                               "in front of a table on disk)");
      }
    }
  }
  return Status::Ok();
}

std::map<size_t, const void*> DiskTables::gpu_row_slots() const {
  std::map<size_t, const void*> slots;
  for (const auto& t : tables_) {
    if (t->gpu) slots[t->input] = t->gpu->device_slots();
  }
  return slots;
}

StatusOr<std::unique_ptr<DiskTables>> DiskTables::Open(Graph& graph, const std::vector<TableInfo>& tables,
                                                       const DiskTablesOptions& options) {
  std::unique_ptr<DiskTables> disk(new DiskTables());
  disk->buffers_ = std::make_shared<Buffers>();
  disk->request_inputs_ = graph.inputs.size();
  int64_t disk_bytes = 0;
  for (const TableInfo& t : tables) disk_bytes += t.tier == TableTier::kDisk ? t.bytes : 0;
  const int64_t cache_bytes = options.cache_bytes >= 0 ? options.cache_bytes : disk_bytes / 10;
  for (const TableInfo& info : tables) {
    if (info.tier != TableTier::kDisk) continue;
    const Tensor* constant = graph.FindConstant(info.value);
    if (!constant || constant->rank() != 2)
      return Internal("table '" + info.name + "' is not a [rows, width] constant");
    auto table = std::make_unique<Table>();
    table->name = info.name;
    table->dtype = constant->dtype();
    table->rows = constant->dim(0);
    table->width = constant->dim(1);
    RANKD_ASSIGN_OR_RETURN(table->sources, FindSources(graph, info.value, info.name, disk->request_inputs_));
    const size_t row_bytes = static_cast<size_t>(table->width) * DTypeSize(table->dtype);
    const double share = disk_bytes > 0 ? static_cast<double>(info.bytes) / static_cast<double>(disk_bytes) : 0;
    // A cached row costs its bytes and its share of the policy's bookkeeping: the budget is real.
    const int64_t cache_rows = std::clamp<int64_t>(static_cast<int64_t>(share * static_cast<double>(cache_bytes)) /
                                                       static_cast<int64_t>(row_bytes + CachePolicy::kBytesPerSlot),
                                                   1, std::clamp<int64_t>(table->rows, 1, INT32_MAX));
    int64_t offset = 0;
    if (const MappedFile* mapped = FileHolding(graph, constant->raw(), constant->bytes(), &offset)) {
      // The descriptor the load opened: the file as it was loaded, whatever replaced it since.
      RANKD_ASSIGN_OR_RETURN(table->shards, OpenShards("/proc/self/fd/" + std::to_string(mapped->fd()), offset,
                                                       table->rows, row_bytes, cache_rows));
      table->file_name = mapped->path();
    } else if (options.directory.empty()) {
      return InvalidArgument("tables: table '" + info.name +
                             "' is on disk but held in memory (not an external-data file the model loaded as is): "
                             "tables.disk_dir names where to write it");
    } else {
      RANKD_ASSIGN_OR_RETURN(const std::string path, WriteRows(options.directory, info.name, *constant));
      auto shards = OpenShards(path, 0, table->rows, row_bytes, cache_rows);
      unlink(path.c_str());  // the file lives as long as its readers
      RANKD_RETURN_IF_ERROR(shards.status());
      table->shards = std::move(*shards);
      table->file_name = options.directory + " (a copy written at load)";
    }
    if (info.cache_rows > 0 && options.make_slots) {  // without a device the cache is ignored, as a cached table's
      RANKD_RETURN_IF_ERROR(CanCacheOnGpu(graph, info));
      RANKD_ASSIGN_OR_RETURN(std::unique_ptr<RowSlots> slots, options.make_slots(std::min(info.cache_rows, table->rows),
                                                                                 static_cast<int64_t>(row_bytes)));
      Table* t = table.get();
      // The cache's rows come through the host cache: its shards each read theirs.
      auto read = [t, row_bytes](std::span<const int64_t> rows, uint8_t* out) -> Status {
        const size_t shards = t->shards.size();
        std::vector<std::vector<int64_t>> ids(shards);
        std::vector<std::vector<size_t>> at(shards);
        for (size_t i = 0; i < rows.size(); ++i) {
          const size_t sh = shards == 1 ? 0 : RowShard(rows[i], shards);
          ids[sh].push_back(rows[i]);
          at[sh].push_back(i);
        }
        std::vector<uint8_t> bytes;
        for (size_t sh = 0; sh < shards; ++sh) {
          if (ids[sh].empty()) continue;
          bytes.resize(ids[sh].size() * row_bytes);
          RANKD_RETURN_IF_ERROR(t->shards[sh]->Read(ids[sh], bytes.data()));
          for (size_t k = 0; k < at[sh].size(); ++k)
            std::memcpy(out + at[sh][k] * row_bytes, bytes.data() + k * row_bytes, row_bytes);
        }
        return Status::Ok();
      };
      auto gpu = GpuRowTier::Create(std::move(slots), table->rows, std::move(read));
      if (!gpu.ok()) return gpu.status().WithContext("tables: table '" + info.name + "'");
      table->gpu = std::move(*gpu);
    }
    disk->tables_.push_back(std::move(table));
  }
  // Only now is the graph changed: each table a graph input after the request's.
  size_t next = 0;
  for (const TableInfo& info : tables) {
    if (info.tier != TableTier::kDisk) continue;
    disk->tables_[next++]->input = graph.inputs.size();
    Value& v = graph.values[static_cast<size_t>(info.value)];
    v.shape = {-1, v.shape.size() == 2 ? v.shape[1] : -1};
    v.rank_known = true;
    graph.constants.erase(info.value);
    graph.inputs.push_back(info.value);
  }
  if (options.gpu_keeper && !disk->gpu_row_slots().empty())
    disk->keeper_ = std::thread([d = disk.get()] { d->KeepLoop(); });
  if (!options.snapshot_path.empty()) {
    std::vector<std::string> names;
    std::vector<std::vector<CachedRowFile*>> caches;
    std::vector<FrontRowCache*> gpu;
    for (const auto& t : disk->tables_) {
      names.push_back(t->name);
      caches.emplace_back();
      for (const auto& shard : t->shards) caches.back().push_back(shard.get());
      gpu.push_back(t->gpu.get());
    }
    disk->hotness_ = std::make_unique<HostCacheHotness>(std::move(names), std::move(caches), options.snapshot_path,
                                                        options.save_every_s, std::move(gpu));
  }
  return disk;
}

void DiskTables::WaitForWarmStart() const {
  if (!hotness_) return;
  hotness_->WaitForWarmStart();
  if (!keeper_.joinable()) return;  // tests keep by hand
  for (const auto& t : tables_) {
    if (t->gpu) t->gpu->WaitUntilWarm();
  }
}

void DiskTables::AppendMetas(std::vector<TensorMeta>& metas) const {
  const size_t request = std::min(metas.size(), request_inputs_);
  for (const auto& t : tables_) {
    int64_t rows = 0;
    for (const IdSource& s : t->sources) {
      if (s.input >= request) continue;
      const Shape& shape = metas[s.input].shape;
      if (s.column >= 0) {
        rows += shape.empty() ? 0 : shape[0];
      } else {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        rows += n;
      }
    }
    metas.push_back({t->dtype, {rows, t->width}, nullptr});
  }
}

StatusOr<StagedRun> DiskTables::Stage(std::span<const Tensor> inputs, std::span<const int64_t> rows) const {
  if (inputs.size() < request_inputs_ || rows.size() != tables_.size())
    return InvalidArgument("expected " + std::to_string(request_inputs_) + " request inputs and rows for " +
                           std::to_string(tables_.size()) + " tables on disk");
  StagedRun staged_run;
  // Inside every GPU cache's readers before its slots are looked at, until the run lets go.
  std::shared_ptr<std::deque<GraceReader>> readers;
  for (const auto& t : tables_) {
    if (!t->gpu) continue;
    if (!readers) readers = std::make_shared<std::deque<GraceReader>>();
    readers->emplace_back(&t->gpu->readers());
  }
  staged_run.hold = std::move(readers);
  std::vector<Tensor>& out = staged_run.inputs;
  out.reserve(request_inputs_ + tables_.size());
  std::vector<bool> rewritten(request_inputs_, false);
  for (const auto& t : tables_) {
    for (const IdSource& s : t->sources) rewritten[s.input] = true;
  }
  for (size_t i = 0; i < request_inputs_; ++i) {
    const Tensor& in = inputs[i];
    if (!rewritten[i]) {
      out.push_back(in.ViewBytes(in.dtype(), in.shape()));
      continue;
    }
    if (in.dtype() != DType::kI64 && in.dtype() != DType::kI32)
      return InvalidArgument("the ids of a table on disk must be INT64 or INT32");
    Tensor copy = Tensor::Empty(in.dtype(), in.shape());
    if (in.bytes()) std::memcpy(copy.raw(), in.raw(), in.bytes());
    out.push_back(std::move(copy));
  }
  // The staged rows (StagedRows: from the pinned pool on a GPU, else heap buffers kept from run to run).
  std::vector<Tensor> staged;
  for (size_t t = 0; t < tables_.size(); ++t)
    staged.push_back(StagedRows(tables_[t]->dtype, rows[t], tables_[t]->width));
  // Every shard of every table side by side, on the request path's helpers (common/helping_pool.h;
  // OpenMP's passive wait stalls requests): first each finds its distinct rows, then, their places
  // known, each rewrites its ids and reads its rows. No two tables' lookups read the same ids (Open
  // checked), and no two shards the same row.
  std::vector<ShardRun> runs;
  std::vector<size_t> table_runs;  // each table's first run
  for (size_t t = 0; t < tables_.size(); ++t) {
    table_runs.push_back(runs.size());
    for (size_t sh = 0; sh < tables_[t]->shards.size(); ++sh) {
      ShardRun run;
      run.table = t;
      run.shard = sh;
      runs.push_back(std::move(run));
    }
  }
  HelpingPool& helpers = HelpingPool::Shared();
  helpers.Run(static_cast<int64_t>(tables_.size()), [&](int64_t t) {
    const size_t first_run = table_runs[static_cast<size_t>(t)];
    SplitIds(std::span<ShardRun>(runs).subspan(first_run, tables_[static_cast<size_t>(t)]->shards.size()), out);
  });
  helpers.Run(static_cast<int64_t>(runs.size()), [&](int64_t r) { FindRows(runs[static_cast<size_t>(r)]); });
  int64_t first = 0;  // the place of each shard's first row in its table's rows
  for (size_t r = 0; r < runs.size(); ++r) {
    ShardRun& run = runs[r];
    RANKD_RETURN_IF_ERROR(run.status);
    if (run.shard == 0) first = 0;
    run.first = first;
    first += static_cast<int64_t>(run.rows.size());
    if (first > rows[run.table]) {
      return Internal("table '" + tables_[run.table]->name + "': a run reads more rows than its plan holds (" +
                      std::to_string(rows[run.table]) + ")");
    }
  }
  helpers.Run(static_cast<int64_t>(runs.size()), [&](int64_t r) {
    ReadRows(runs[static_cast<size_t>(r)], out, staged[runs[static_cast<size_t>(r)].table]);
  });
  for (const ShardRun& run : runs) RANKD_RETURN_IF_ERROR(run.status);
  for (Tensor& t : staged) out.push_back(std::move(t));
  return staged_run;
}

Tensor DiskTables::StagedRows(DType dtype, int64_t rows, int64_t width) const {
  if (CurrentHostAllocator()) {  // a GPU's pinned pool: the rows are read where they lie, not packed again
    RequestTensorScope request_tensors;
    Tensor staged = Tensor::Empty(dtype, {rows, width});
    if (staged.location().kind == MemoryKind::kPinned) return staged;
  }
  const size_t bytes = (static_cast<size_t>(rows * width) * DTypeSize(dtype) + 63) / 64 * 64 + 64;
  Buffers::Buffer buffer;
  {
    MutexLock lock(buffers_->mu);
    auto& free = buffers_->free;
    auto best = free.end();  // the smallest that fits
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->bytes >= bytes && (best == free.end() || it->bytes < best->bytes)) best = it;
    }
    if (best != free.end()) {
      buffer = *best;
      free.erase(best);
    }
  }
  if (!buffer.memory) buffer = {bytes, std::aligned_alloc(64, bytes)};
  if (!buffer.memory) return Tensor::Empty(dtype, {rows, width});  // the heap's own failure path
  std::shared_ptr<void> keep(buffer.memory, [buffers = buffers_, buffer](void*) {
    MutexLock lock(buffers->mu);
    if (buffers->free.size() < Buffers::kKept) {
      buffers->free.push_back(buffer);
    } else {
      std::free(buffer.memory);
    }
  });
  return Tensor::View(dtype, {rows, width}, buffer.memory, MemoryLocation::Host(), std::move(keep));
}

void DiskTables::SplitIds(std::span<ShardRun> runs, std::span<const Tensor> inputs) const {
  const Table& t = *tables_[runs.front().table];
  const size_t shards = runs.size();
  for (size_t source = 0; source < t.sources.size(); ++source) {
    const IdSource& s = t.sources[source];
    const Tensor& ids = inputs[s.input];
    const bool wide = ids.dtype() == DType::kI64;
    const int64_t n = ids.size();
    const int64_t step = s.column >= 0 && ids.rank() == 2 ? ids.dim(1) : 1;
    for (ShardRun& run : runs) run.at.reserve(run.at.size() + static_cast<size_t>(n / step) / shards + 16);
    for (int64_t i = s.column >= 0 && ids.rank() == 2 ? s.column : 0; i < n; i += step) {
      int64_t id = wide ? ids.data<int64_t>()[i] : ids.data<int32_t>()[i];
      if (!s.gather && id < 0) continue;  // an empty slot of a bag
      if (s.gather) {
        id = std::max(id, s.floor);
        if (id < 0) id += t.rows;
      }
      if (id < 0 || id >= t.rows) {
        runs.front().status =
            InvalidArgument("table '" + t.name + "': id " + std::to_string(id < 0 ? id - t.rows : id) +
                            " is out of range for a table of " + std::to_string(t.rows) + " rows");
        return;
      }
      runs[shards == 1 ? 0 : RowShard(id, shards)].at.push_back({source, i, id, 0});
    }
  }
}

void DiskTables::FindRows(ShardRun& run) const {
  RowPlaces places(run.at.size());
  std::vector<int64_t> distinct;
  for (ShardRun::At& at : run.at) {
    at.local = places.Find(at.row, static_cast<int32_t>(distinct.size()));
    if (at.local == static_cast<int32_t>(distinct.size())) distinct.push_back(at.row);
  }
  GpuRowTier* gpu = tables_[run.table]->gpu.get();
  if (!gpu) {
    run.rows = std::move(distinct);
    return;
  }
  run.codes.resize(distinct.size());
  uint64_t hits = 0;
  for (size_t k = 0; k < distinct.size(); ++k) {
    const int32_t slot = gpu->SlotOf(distinct[k]);
    if (slot >= 0) {
      run.codes[k] = gpu->Encode(slot);
      ++hits;
    } else {
      run.codes[k] = static_cast<int64_t>(run.rows.size());
      run.rows.push_back(distinct[k]);
    }
  }
  gpu->Offer(std::move(distinct), hits);
}

void DiskTables::ReadRows(ShardRun& run, std::span<Tensor> inputs, Tensor& staged) const {
  const Table& t = *tables_[run.table];
  for (const ShardRun::At& at : run.at) {
    Tensor& ids = inputs[t.sources[at.source].input];
    const int64_t code = run.codes.empty() ? at.local : run.codes[static_cast<size_t>(at.local)];
    const int64_t place = code >= 0 ? run.first + code : code;
    if (ids.dtype() == DType::kI64) {
      ids.data<int64_t>()[at.element] = place;
    } else {
      ids.data<int32_t>()[at.element] = static_cast<int32_t>(place);
    }
  }
  if (run.rows.empty()) return;
  auto* to = static_cast<uint8_t*>(staged.raw()) + static_cast<size_t>(run.first) * t.shards[0]->file().row_bytes();
  run.status = t.shards[run.shard]->Read(run.rows, to).WithContext("table '" + t.name + "' on disk");
}

Status DiskTables::KeepGpuCaches() const {
  for (const auto& t : tables_) {
    if (t->gpu) RANKD_RETURN_IF_ERROR(t->gpu->Keep());
  }
  return Status::Ok();
}

std::vector<DiskTableStats> DiskTables::stats() const {
  std::vector<DiskTableStats> all;
  for (size_t i = 0; i < tables_.size(); ++i) {
    const auto& t = tables_[i];
    DiskTableStats d;
    d.table = t->name;
    d.file = t->file_name;
    d.direct = t->shards[0]->file().direct();
    for (const auto& shard : t->shards) {
      const CachedRowFileStats cache = shard->stats();
      const RowFileStats file = shard->file().stats();
      d.capacity += shard->capacity();
      d.cached += shard->cached_rows();
      d.host_bytes += shard->host_bytes();
      d.lookups += cache.lookups;
      d.hits += cache.hits;
      d.rows_read += file.rows;
      d.bytes_read += file.bytes_read;
      d.inserted += cache.inserted;
      d.warmed += cache.warmed;
      d.evicted += cache.evicted;
      d.reads += cache.reads;
    }
    if (t->gpu) {
      d.gpu_cache = true;
      d.gpu = t->gpu->stats();
    }
    if (hotness_) {  // the warm start's reads, on a reader of its own
      const RowFileStats warm = hotness_->reads(i);
      d.rows_read += warm.rows;
      d.bytes_read += warm.bytes_read;
    }
    all.push_back(std::move(d));
  }
  return all;
}

}  // namespace rankd
