#include "embedding/disk_tables.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "common/helping_pool.h"
#include "common/host_allocator.h"
#include "embedding/lookups.h"
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

struct DiskTables::Table {
  std::string name;
  DType dtype = DType::kInvalid;
  int64_t rows = 0, width = 0;
  std::vector<IdSource> sources;
  std::unique_ptr<CachedRowFile> file;
  std::string file_name;  // for messages: the external-data file, or the copy written at load
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

// Writes `table` into a new file in `directory` and opens it for reading; the file is unlinked at
// once, so it lives as long as the reader.
StatusOr<std::unique_ptr<RowFile>> WriteRows(const std::string& directory, const std::string& name, const Tensor& table,
                                             size_t row_bytes) {
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
  auto file = RowFile::Open(path, 0, table.dim(0), row_bytes);
  unlink(path.c_str());
  return file;
}

}  // namespace

DiskTables::~DiskTables() = default;

Status DiskTables::CanServe(const Graph& graph, const TableInfo& table) {
  return FindSources(graph, table.value, table.name, graph.inputs.size()).status();
}

StatusOr<std::unique_ptr<DiskTables>> DiskTables::Open(Graph& graph, const std::vector<TableInfo>& tables,
                                                       const DiskTablesOptions& options) {
  std::unique_ptr<DiskTables> disk(new DiskTables());
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
    std::unique_ptr<RowFile> rows;
    int64_t offset = 0;
    if (const MappedFile* mapped = FileHolding(graph, constant->raw(), constant->bytes(), &offset)) {
      // The descriptor the load opened: the file as it was loaded, whatever replaced it since.
      RANKD_ASSIGN_OR_RETURN(
          rows, RowFile::Open("/proc/self/fd/" + std::to_string(mapped->fd()), offset, table->rows, row_bytes));
      table->file_name = mapped->path();
    } else if (options.directory.empty()) {
      return InvalidArgument("tables: table '" + info.name +
                             "' is on disk but held in memory (not an external-data file the model loaded as is): "
                             "tables.disk_dir names where to write it");
    } else {
      RANKD_ASSIGN_OR_RETURN(rows, WriteRows(options.directory, info.name, *constant, row_bytes));
      table->file_name = options.directory + " (a copy written at load)";
    }
    const double share = disk_bytes > 0 ? static_cast<double>(info.bytes) / static_cast<double>(disk_bytes) : 0;
    const int64_t cache_rows = std::clamp<int64_t>(
        static_cast<int64_t>(share * static_cast<double>(cache_bytes)) / static_cast<int64_t>(row_bytes), 1,
        std::max<int64_t>(table->rows, 1));
    RANKD_ASSIGN_OR_RETURN(table->file, CachedRowFile::Create(std::move(rows), cache_rows));
    disk->tables_.push_back(std::move(table));
  }
  // Only now is the graph changed: each table a graph input after the request's.
  for (const TableInfo& info : tables) {
    if (info.tier != TableTier::kDisk) continue;
    Value& v = graph.values[static_cast<size_t>(info.value)];
    v.shape = {-1, v.shape.size() == 2 ? v.shape[1] : -1};
    v.rank_known = true;
    graph.constants.erase(info.value);
    graph.inputs.push_back(info.value);
  }
  return disk;
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

StatusOr<std::vector<Tensor>> DiskTables::Stage(std::span<const Tensor> inputs, std::span<const int64_t> rows) const {
  if (inputs.size() < request_inputs_ || rows.size() != tables_.size())
    return InvalidArgument("expected " + std::to_string(request_inputs_) + " request inputs and rows for " +
                           std::to_string(tables_.size()) + " tables on disk");
  RequestTensorScope request_tensors;
  std::vector<Tensor> out;
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
  // The tables side by side: each rewrites its own ids (no two tables' lookups read the same ids:
  // Open checked) and reads its own file, so their reads are in flight together.
  // Allocated here, on the caller's thread, as request tensors: on a GPU they then come from the
  // page-locked pool and reach the device without another copy.
  std::vector<Tensor> staged;
  for (size_t t = 0; t < tables_.size(); ++t)
    staged.push_back(Tensor::Empty(tables_[t]->dtype, {rows[t], tables_[t]->width}));
  std::vector<Status> status(tables_.size());
  // On the request path's helpers (common/helping_pool.h), not OpenMP's pool, whose passive wait
  // stalls requests.
  HelpingPool::Shared().Run(static_cast<int64_t>(tables_.size()), [&](int64_t t) {
    const auto ti = static_cast<size_t>(t);
    status[ti] = StageTable(*tables_[ti], out, rows[ti], staged[ti]);
  });
  for (size_t t = 0; t < tables_.size(); ++t) {
    RANKD_RETURN_IF_ERROR(status[t]);
    out.push_back(std::move(staged[t]));
  }
  return out;
}

Status DiskTables::StageTable(const Table& t, std::span<Tensor> inputs, int64_t rows, Tensor& staged) {
  std::unordered_map<int64_t, int64_t> place;  // row -> its place among the run's rows
  std::vector<int64_t> distinct;
  for (const IdSource& s : t.sources) {
    Tensor& ids = inputs[s.input];
    const bool wide = ids.dtype() == DType::kI64;
    const int64_t n = ids.size();
    const int64_t step = s.column >= 0 && ids.rank() == 2 ? ids.dim(1) : 1;
    const int64_t first = s.column >= 0 && ids.rank() == 2 ? s.column : 0;
    place.reserve(place.size() + static_cast<size_t>(n / step));
    for (int64_t i = first; i < n; i += step) {
      int64_t id = wide ? ids.data<int64_t>()[i] : ids.data<int32_t>()[i];
      if (!s.gather && id < 0) continue;  // an empty slot of a bag
      if (s.gather) {
        id = std::max(id, s.floor);
        if (id < 0) id += t.rows;
      }
      if (id < 0 || id >= t.rows) {
        return InvalidArgument("table '" + t.name + "': id " + std::to_string(id < 0 ? id - t.rows : id) +
                               " is out of range for a table of " + std::to_string(t.rows) + " rows");
      }
      auto [it, fresh] = place.try_emplace(id, static_cast<int64_t>(distinct.size()));
      if (fresh) distinct.push_back(id);
      if (wide) {
        ids.data<int64_t>()[i] = it->second;
      } else {
        ids.data<int32_t>()[i] = static_cast<int32_t>(it->second);
      }
    }
  }
  if (static_cast<int64_t>(distinct.size()) > rows) {
    return Internal("table '" + t.name + "': a run reads " + std::to_string(distinct.size()) +
                    " rows, more than its plan holds (" + std::to_string(rows) + ")");
  }
  return t.file->Read(distinct, staged.raw()).WithContext("table '" + t.name + "' on disk");
}

std::vector<DiskTableStats> DiskTables::stats() const {
  std::vector<DiskTableStats> all;
  for (const auto& t : tables_) {
    const CachedRowFileStats cache = t->file->stats();
    const RowFileStats file = t->file->file().stats();
    all.push_back({t->name, t->file_name, t->file->file().direct(), t->file->capacity(), t->file->cached_rows(),
                   cache.lookups, cache.hits, file.rows, file.bytes_read, cache.inserted, cache.evicted});
  }
  return all;
}

}  // namespace rankd
