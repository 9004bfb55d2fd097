// The kernels of GatherHostRows (host_row_gather.h): ids keyed by table and row, sorted with their
// places (CUB), distinct rows given their offsets (a scan of their units), then each row copied
// once in key order and each id rewritten.
#include <algorithm>
#include <limits>
#include <vector>

#include <cub/cub.cuh>

#include "backend/cuda/device.h"
#include "backend/cuda/host_row_gather.h"
#include "backend/cuda/indexing.cuh"

namespace rankd::cuda {
namespace {

// What the kernels know of a gather, passed by value: the inputs in the order of their ids'
// places (input i's ids have places [start, start + n)), and the distinct tables in the order of
// their keys (table t's rows have keys [base, base + rows)). A key of `sentinel` is no row.
struct Layout {
  struct Input {
    void* ids;
    uint64_t start;
    uint64_t base;  // its table's
    int64_t rows;   // its table's
    uint32_t wide;
    uint32_t unused;
  } in[kMostGatheredInputs];
  struct Table {
    const uint4* rows;
    uint64_t base;
    uint32_t units;  // kStagedUnitBytes pieces a row
    uint32_t unused;
  } table[kMostGatheredInputs];
  uint32_t inputs = 0, tables = 0;
  uint64_t sentinel = 0;
  uint32_t group_lanes = 1;  // lanes that copy one row (a power of two, a warp at most)
};
static_assert(sizeof(Layout) <= 4000, "a launch's parameters must stay under 4 KiB");

// Of `count` items ascending by `first(item)`, the last whose first is at or before `at`.
template <typename Item, typename First>
__device__ inline const Item& LastFrom(const Item* items, uint32_t count, uint64_t at, First first) {
  uint32_t lo = 0, hi = count - 1;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (first(items[mid]) <= at)
      lo = mid;
    else
      hi = mid - 1;
  }
  return items[lo];
}

// The input whose places hold `place`, and the table whose keys hold `key`.
__device__ inline const Layout::Input& InputAt(const Layout& l, uint64_t place) {
  return LastFrom(l.in, l.inputs, place, [](const Layout::Input& in) { return in.start; });
}
__device__ inline const Layout::Table& TableAt(const Layout& l, uint64_t key) {
  return LastFrom(l.table, l.tables, key, [](const Layout::Table& t) { return t.base; });
}

__device__ inline int64_t ReadId(const Layout::Input& in, uint64_t j) {
  return in.wide ? static_cast<const int64_t*>(in.ids)[j] : static_cast<const int32_t*>(in.ids)[j];
}

__device__ inline void WriteId(const Layout::Input& in, uint64_t j, int64_t v) {
  if (in.wide)
    static_cast<int64_t*>(in.ids)[j] = v;
  else
    static_cast<int32_t*>(in.ids)[j] = static_cast<int32_t>(v);
}

// Each id's key and place; an empty slot's id becomes -1 and one past its table the table's end,
// both keyed as no row.
__global__ void KeysKernel(const Layout l, uint64_t* keys, uint32_t* places, int64_t n) {
  RANKD_GRID_LOOP(p, n) {
    const auto place = static_cast<uint64_t>(p);
    const Layout::Input& in = InputAt(l, place);
    const uint64_t j = place - in.start;
    const int64_t id = ReadId(in, j);
    uint64_t key = l.sentinel;
    if (id < 0) {
      if (id != -1) WriteId(in, j, -1);
    } else if (id >= in.rows) {
      if (id != in.rows) WriteId(in, j, in.rows);
    } else {
      key = in.base + static_cast<uint64_t>(id);
    }
    keys[p] = key;
    places[p] = static_cast<uint32_t>(place);
  }
}

// A sorted key's units where it is its row's first, else 0.
__global__ void UnitsKernel(const Layout l, const uint64_t* keys, uint32_t* units, int64_t n) {
  RANKD_GRID_LOOP(i, n) {
    const uint64_t key = keys[i];
    const bool first = key != l.sentinel && (i == 0 || keys[i - 1] != key);
    units[i] = first ? TableAt(l, key).units : 0;
  }
}

// A lane group per sorted key: the row's first copies it to its offset (the scan's end less its
// units) if the room holds it, and every id of it is rewritten as that offset.
__global__ void PlaceKernel(const Layout l, const uint64_t* keys, const uint32_t* places, const uint32_t* ends,
                            uint4* rows, uint64_t room_units, int64_t n) {
  const uint32_t group = l.group_lanes;
  const auto lane = static_cast<uint32_t>(threadIdx.x % group);
  const int64_t groups = static_cast<int64_t>(gridDim.x) * blockDim.x / group;
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / group; i < n; i += groups) {
    const uint64_t key = keys[i];
    if (key == l.sentinel) continue;
    const Layout::Table& t = TableAt(l, key);
    const uint64_t end = ends[i], first = end - t.units;
    if (end > room_units) continue;  // past the room: read in place
    if (i == 0 || keys[i - 1] != key) {
      const uint4* from = t.rows + (key - t.base) * t.units;
      for (uint32_t u = lane; u < t.units; u += group) rows[first + u] = from[u];
    }
    if (lane == 0) {
      const uint64_t place = places[i];
      const Layout::Input& in = InputAt(l, place);
      WriteId(in, place - in.start, -2 - static_cast<int64_t>(first));
    }
  }
}

size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The bits a key takes: enough for the sentinel.
int KeyBits(uint64_t sentinel) {
  int bits = 1;
  while (bits < 64 && (uint64_t{1} << bits) <= sentinel) ++bits;
  return bits;
}

// The layout of `inputs` (their tables ordered by address, one key range each), and the ids in all.
bool LayOut(std::span<const GatheredInput> inputs, Layout& l, int64_t& n) {
  if (inputs.empty() || inputs.size() > kMostGatheredInputs) return false;
  std::vector<const GatheredInput*> tables;
  for (const GatheredInput& in : inputs) {
    if (in.row_bytes <= 0 || in.row_bytes % static_cast<int64_t>(kStagedUnitBytes) != 0 || in.table_rows <= 0)
      return false;
    bool seen = false;
    for (const GatheredInput* t : tables) seen = seen || t->table == in.table;
    if (!seen) tables.push_back(&in);
  }
  std::sort(tables.begin(), tables.end(), [](auto* a, auto* b) { return a->table < b->table; });
  uint64_t base = 0, max_units = 0;
  l.tables = static_cast<uint32_t>(tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    const uint64_t units = static_cast<uint64_t>(tables[t]->row_bytes) / kStagedUnitBytes;
    l.table[t] = {static_cast<const uint4*>(tables[t]->table), base, static_cast<uint32_t>(units), 0};
    base += static_cast<uint64_t>(tables[t]->table_rows);
    max_units = std::max(max_units, units);
  }
  l.sentinel = base;
  l.group_lanes = 1;
  while (l.group_lanes < 32 && l.group_lanes < max_units) l.group_lanes *= 2;
  uint64_t start = 0;
  l.inputs = static_cast<uint32_t>(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GatheredInput& in = inputs[i];
    uint64_t table_base = 0;
    for (uint32_t t = 0; t < l.tables; ++t) {
      if (l.table[t].rows == in.table) table_base = l.table[t].base;
    }
    l.in[i] = {in.ids, start, table_base, in.table_rows, in.wide ? 1u : 0u, 0};
    start += static_cast<uint64_t>(in.n);
  }
  n = static_cast<int64_t>(start);
  // Places and offsets are 32-bit: every id's row must fit the scan's sum.
  return n > 0 && static_cast<uint64_t>(n) * max_units < std::numeric_limits<uint32_t>::max();
}

// The sort's and the scan's temporary storage for n keys, with end_bit key bits.
size_t TempBytes(int64_t n, int end_bit) {
  size_t sort = 0, scan = 0;
  const auto count = static_cast<int>(n);
  if (cub::DeviceRadixSort::SortPairs(nullptr, sort, static_cast<const uint64_t*>(nullptr),
                                      static_cast<uint64_t*>(nullptr), static_cast<const uint32_t*>(nullptr),
                                      static_cast<uint32_t*>(nullptr), count, 0, end_bit) != cudaSuccess ||
      cub::DeviceScan::InclusiveSum(nullptr, scan, static_cast<const uint32_t*>(nullptr),
                                    static_cast<uint32_t*>(nullptr), count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return std::max(sort, scan);
}

// Where the scratch holds each array for n ids: keys and places before and after the sort, then
// the temporary storage. After the sort the units take the places' first array, the scan's ends
// the keys'.
struct Scratch {
  uint64_t *keys_in, *keys_out;
  uint32_t *places_in, *places_out;
  void* temp;
  size_t temp_bytes;
};
size_t ScratchLayout(int64_t n, int end_bit, void* base, Scratch* s) {
  const size_t temp = TempBytes(n, end_bit);
  if (temp == 0) return 0;
  const auto count = static_cast<size_t>(n);
  const size_t keys = Aligned(count * sizeof(uint64_t)), places = Aligned(count * sizeof(uint32_t));
  if (s) {
    auto* at = static_cast<uint8_t*>(base);
    s->keys_in = reinterpret_cast<uint64_t*>(at);
    s->keys_out = reinterpret_cast<uint64_t*>(at + keys);
    s->places_in = reinterpret_cast<uint32_t*>(at + 2 * keys);
    s->places_out = reinterpret_cast<uint32_t*>(at + 2 * keys + places);
    s->temp = at + 2 * keys + 2 * places;
    s->temp_bytes = temp;
  }
  return 2 * keys + 2 * places + Aligned(temp);
}

}  // namespace

size_t HostRowGatherScratchBytes(std::span<const GatheredInput> inputs) {
  Layout l;
  int64_t n = 0;
  if (!LayOut(inputs, l, n) || n > std::numeric_limits<int32_t>::max()) return 0;
  return ScratchLayout(n, KeyBits(l.sentinel), nullptr, nullptr);
}

Status GatherHostRows(std::span<const GatheredInput> inputs, void* scratch, size_t scratch_bytes, void* rows,
                      size_t room_units, cudaStream_t stream) {
  Layout l;
  int64_t n = 0;
  if (!LayOut(inputs, l, n) || n > std::numeric_limits<int32_t>::max())
    return InvalidArgument("these ids cannot be gathered on the device");
  const int end_bit = KeyBits(l.sentinel);
  Scratch s{};
  const size_t need = ScratchLayout(n, end_bit, scratch, &s);
  if (need == 0 || need > scratch_bytes) return Internal("the device gather's scratch is too small");
  const auto count = static_cast<int>(n);
  KeysKernel<<<Blocks(n), kThreads, 0, stream>>>(l, s.keys_in, s.places_in, n);
  RANKD_CUDA_RETURN(cudaGetLastError());
  RANKD_CUDA_RETURN(cub::DeviceRadixSort::SortPairs(s.temp, s.temp_bytes, s.keys_in, s.keys_out, s.places_in,
                                                    s.places_out, count, 0, end_bit, stream));
  uint32_t* units = s.places_in;  // free after the sort
  auto* ends = reinterpret_cast<uint32_t*>(s.keys_in);
  UnitsKernel<<<Blocks(n), kThreads, 0, stream>>>(l, s.keys_out, units, n);
  RANKD_CUDA_RETURN(cudaGetLastError());
  RANKD_CUDA_RETURN(cub::DeviceScan::InclusiveSum(s.temp, s.temp_bytes, units, ends, count, stream));
  const uint64_t room = std::min<uint64_t>(room_units, static_cast<uint64_t>(kStagedSlotFrom) - 1);
  PlaceKernel<<<Blocks(n * l.group_lanes), kThreads, 0, stream>>>(l, s.keys_out, s.places_out, ends,
                                                                  static_cast<uint4*>(rows), room, n);
  RANKD_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

}  // namespace rankd::cuda
