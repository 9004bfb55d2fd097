// Device code of ConcatEmbeddingBags's pooling (embedding_concat.cu, its only includer): a part's
// description, 16-byte row pieces, the stores into the output's columns, and the three ways a bag
// is pooled: by a warp (or several, split) in 16-byte pieces (PoolVector), by an element per lane
// (PoolScalar), or by a lane group, several bags a warp (PoolGrouped). Device-only header, in a
// namespace of its own so that its short names meet no other kernel file's.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/dtypes.cuh"
#include "backend/cuda/indexing.cuh"
#include "model/ops/bag_combiner.h"

namespace rankd::cuda::bag_pool {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;
constexpr int kChunk = 16;  // ids a warp loads at once (one per lane) and then pools
constexpr int kMaxVec = 8;  // elements per 16-byte load, at most
constexpr unsigned kAllLanes = 0xffffffffu;

enum class RowType : uint8_t { kF32, kF16, kBF16 };

// Where a part's ids below -1 point: rows the host staged for a cached table's misses
// (runtime/cuda/placed_ids.h), or rows of a table in host memory gathered on the device
// (host_row_gather.h); or nowhere, every id a row.
enum class Placed : uint8_t { kNo, kStagedByHost, kGatheredOnDevice };

// One part of a concatenation, as the host laid it out (embedding_concat.cu): a bag of table rows
// pooled, or a value copied, into its columns of the output.
struct Part {
  const void* src = nullptr;         // the table, or the copied values [rows, dim]
  const void* ids = nullptr;         // a bag's ids (null when it has none at all)
  const int64_t* offsets = nullptr;  // null for padded ids
  const float* weights = nullptr;    // a weighted sum's weight per id (ragged ids), else null
  int64_t table_rows = 0;
  int64_t n_ids = 0;             // with weights, the ids that have one
  int64_t id_floor = INT64_MIN;  // with id_column: an id below it reads as it (before counting from the end)
  int32_t dim = 0;
  int32_t width = 0;       // padded ids per bag
  int32_t column = 0;      // first output column
  int32_t id_column = -1;  // >= 0: one id per row, ids[b, id_column], a negative one counting from the end
  RowType row_type = RowType::kF32;
  bool wide_ids = true;         // INT64 ids, else INT32
  uint8_t combiner = 0;         // model/ops/bag_combiner.h
  bool vector = false;          // 16-byte loads and stores
  bool copied = false;          // a value copied into its columns, not a bag
  bool grouped = false;         // large launches: a lane group per bag (PoolGrouped), ids below 2^31
  uint8_t split = 1;            // warps per bag, a power of two up to kWarpsPerBlock (16-byte bags only)
  uint8_t group_shift = 0;      // with grouped: log2 of a group's lanes (BagsPerWarp)
  bool whole = false;           // with grouped: the row is a whole number of its group's pieces
  uint8_t chunks_per_lane = 1;  // with grouped: 16-byte pieces of a row each lane of a group reads
  int16_t cache = -1;           // the table's device cache: its index in the launch's caches (-1: none)
  Placed placed = Placed::kNo;  // where its ids below -1 point (RowCacheView::staged)
};

// With grouped: the warp's lane groups, each pooling a bag of its own.
__host__ __device__ inline int BagsPerWarp(const Part& p) { return kWarp >> p.group_shift; }

// V consecutive row elements in one 16-byte load (Raw), added to V float sums times a weight (1
// for an unweighted bag: fmaf(1, x, sum) is sum + x, bit for bit).
template <typename Row>
struct Vec;
template <>
struct Vec<float> {
  static constexpr int kN = 4;
  using Raw = float4;
  __device__ static Raw Zero() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
  __device__ static Raw Load(const float* p) { return *reinterpret_cast<const float4*>(p); }
  __device__ static Raw LoadPastL1(const float* p) { return __ldcg(reinterpret_cast<const float4*>(p)); }
  __device__ static void Add(const Raw& x, float w, float (&acc)[kN]) {
    acc[0] = fmaf(w, x.x, acc[0]), acc[1] = fmaf(w, x.y, acc[1]), acc[2] = fmaf(w, x.z, acc[2]);
    acc[3] = fmaf(w, x.w, acc[3]);
  }
};
// Eight 16-bit elements.
template <typename Row>
struct Vec16Bit {
  static constexpr int kN = 8;
  using Raw = uint4;
  __device__ static Raw Zero() { return make_uint4(0, 0, 0, 0); }
  __device__ static Raw Load(const Row* p) { return *reinterpret_cast<const uint4*>(p); }
  __device__ static Raw LoadPastL1(const Row* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }
};
template <>
struct Vec<__half> : Vec16Bit<__half> {
  __device__ static void Add(const Raw& x, float w, float (&acc)[kN]) {
    const __half2* h = reinterpret_cast<const __half2*>(&x);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      acc[2 * i] = fmaf(w, f.x, acc[2 * i]), acc[2 * i + 1] = fmaf(w, f.y, acc[2 * i + 1]);
    }
  }
};
// A bf16 is the top half of the float it stands for, so a word of two widens by a shift and a
// mask (the intrinsic's conversion took three instructions for the upper one).
template <>
struct Vec<__nv_bfloat16> : Vec16Bit<__nv_bfloat16> {
  __device__ static void Add(const Raw& x, float w, float (&acc)[kN]) {
    const uint32_t words[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc[2 * i] = fmaf(w, __uint_as_float(words[i] << 16), acc[2 * i]);
      acc[2 * i + 1] = fmaf(w, __uint_as_float(words[i] & 0xffff0000u), acc[2 * i + 1]);
    }
  }
};

// Where an output row goes: its fp32 columns (null when the bf16 copy is written alone), and its
// bf16 copy's (null when none is wanted). Both null: a row past the batch, not stored.
struct Dst {
  float* out;
  __nv_bfloat16* copy;
  __device__ bool stored() const { return out || copy; }
};

// N (4 or 8) consecutive elements, times scale: 16-byte fp32 stores, and 8-byte stores of their
// bf16 copy, or one 16-byte store where its address allows.
template <int N>
__device__ void Store(Dst dst, int64_t d0, const float (&v)[N], float scale) {
  static_assert(N == 4 || N == 8, "four or eight elements");
  float r[N];
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = v[i] * scale;
  if (dst.out) {
#pragma unroll
    for (int i = 0; i < N; i += 4)
      *reinterpret_cast<float4*>(dst.out + d0 + i) = make_float4(r[i], r[i + 1], r[i + 2], r[i + 3]);
  }
  if (dst.copy) {
    __nv_bfloat162 c[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) c[i] = __float22bfloat162_rn(make_float2(r[2 * i], r[2 * i + 1]));
    const uint2* quads = reinterpret_cast<const uint2*>(c);  // four bf16 each
    uint2* to = reinterpret_cast<uint2*>(dst.copy + d0);
    if constexpr (N == 8) {
      if (reinterpret_cast<uintptr_t>(to) % 16 == 0) {
        *reinterpret_cast<uint4*>(to) = make_uint4(quads[0].x, quads[0].y, quads[1].x, quads[1].y);
      } else {
        to[0] = quads[0], to[1] = quads[1];
      }
    } else {
      to[0] = quads[0];
    }
  }
}

__device__ inline void StoreOne(Dst dst, int64_t d, float v) {
  if (dst.out) dst.out[d] = v;
  if (dst.copy) dst.copy[d] = __float2bfloat16_rn(v);
}

// A looked-up id as Gather reads it: a negative one counts from the table's end; one still out of
// range is reported (and read as an empty slot).
__device__ inline int64_t Wrapped(int64_t id, int64_t rows, bool report, int* error, int step) {
  if (id < 0) id += rows;
  if (id < 0 || id >= rows) {
    if (report) ReportBadData(error, step);
    return -1;
  }
  return id;
}

// A bag's id as the lookup reads it, or -1 for a slot to skip. Padding (-1) is skipped; an id
// past the table is reported and skipped; with id_column set a negative id counts from the
// table's end, as Gather reads it.
__device__ inline int64_t Checked(int64_t id, const Part& p, bool report, int* error, int step) {
  if (p.id_column >= 0) return Wrapped(max(id, p.id_floor), p.table_rows, report, error, step);
  if (id >= p.table_rows) {
    if (report) ReportBadData(error, step);
    return -1;
  }
  return id < 0 ? -1 : id;
}

// A row's slot in the table's device cache, or -1 when the row is read from the table (or there
// is no cache).
__device__ inline int32_t SlotOf(RowCacheView cache, int64_t id) {
  return cache.slot_of_row ? __ldcg(cache.slot_of_row + id) : -1;
}

// A bag's id as its lookup reads it: `id` (-1: nothing to read) and, for a cached table, its
// `slot` (-1: read from the table). Of placed ids (RowCacheView::staged set) one below -1 is a
// staged row: `id` 0, its slot past kStagedSlotFrom.
__device__ inline void Locate(int64_t v, const Part& p, RowCacheView cache, bool report, int* error, int step,
                              int64_t& id, int32_t& slot) {
  if (cache.staged && v < -1) {
    id = 0, slot = kStagedSlotFrom + static_cast<int32_t>(-2 - v);
    return;
  }
  id = Checked(v, p, report, error, step);
  slot = id >= 0 ? SlotOf(cache, id) : -1;
}

// Slot `slot`'s row: in the cache's slots, or past kStagedSlotFrom the run's staged rows.
template <typename Row>
__device__ inline const Row* SlotRow(RowCacheView cache, int32_t slot, int64_t dim) {
  if (slot >= kStagedSlotFrom) {
    return reinterpret_cast<const Row*>(static_cast<const char*>(cache.staged) +
                                        static_cast<uint64_t>(slot - kStagedSlotFrom) * kStagedUnitBytes);
  }
  return static_cast<const Row*>(cache.slots) + slot * dim;
}

// Lanes that cover a row of `chunks` 16-byte pieces: a power of two, the whole warp at most.
__host__ __device__ inline int RowLanes(int64_t chunks) {
  int lanes = 1;
  while (lanes < kWarp && lanes < chunks) lanes *= 2;
  return lanes;
}

// Which of its bag's `count` warps a warp is (the bag's `index`-th slice of ids: every
// count-th chunk of kChunk ids from the index-th), with the block's shared memory that slices
// other than the first hand their sums over in.
struct Slice {
  int index = 0, count = 1;
  float* sums = nullptr;  // [kWarpsPerBlock][kWarp * kMaxVec]
  int* counts = nullptr;  // [kWarpsPerBlock]
};

// Bag [lo, hi) of part `p` into dst[0, dim) (no store when !dst.stored()), 16-byte pieces per
// lane. The warp reads its slice's ids kChunk at a time, one per lane in one coalesced load,
// checks them there and hands them out by shuffles, so a table row is the only load on an id's
// path and kIdsInFlight rows per lane are loaded before any is summed. Where a row needs at most
// half the warp, the warp's lane groups each sum every groups-th id and the groups' sums meet in
// a fixed butterfly; a split bag's slices meet in slice order. The order of the additions thus
// depends on the table's width and the part's split only.
template <int kIdsInFlight, typename Row, typename Id>
__device__ void PoolVector(const Part& p, RowCacheView cache, int64_t lo, int64_t hi, int lane, Dst dst, int* error,
                           int step, Slice slice) {
  constexpr int V = Vec<Row>::kN;
  const Row* table = static_cast<const Row*>(p.src);
  const Id* ids = static_cast<const Id*>(p.ids);
  const int row_lanes = RowLanes(p.dim / V);
  const int groups = kWarp / row_lanes, group = lane / row_lanes;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  for (int64_t first_d = 0; first_d < p.dim; first_d += kWarp * V) {
    const int64_t d0 = first_d + static_cast<int64_t>(lane % row_lanes) * V;
    const bool active = d0 < p.dim;
    float acc[V] = {};
    int count = 0;
    const int64_t stride = static_cast<int64_t>(slice.count) * kChunk;
    for (int64_t base = lo + static_cast<int64_t>(slice.index) * kChunk; base < hi; base += stride) {
      const int n = static_cast<int>(min(static_cast<int64_t>(kChunk), hi - base));
      int64_t mine = -1;
      int32_t mine_slot = -1;  // each lane its own id's, once
      float mine_weight = 1.0f;
      if (lane < n) {
        Locate(static_cast<int64_t>(ids[base + lane]), p, cache, first_d == 0, error, step, mine, mine_slot);
        if (p.weights) mine_weight = p.weights[base + lane];
      }
      for (int k = 0; k < n; k += groups * kIdsInFlight) {
        typename Vec<Row>::Raw raw[kIdsInFlight];
        int64_t id[kIdsInFlight];
        float weight[kIdsInFlight];
#pragma unroll
        for (int u = 0; u < kIdsInFlight; ++u) {
          const int from = k + group + groups * u;
          id[u] = __shfl_sync(kAllLanes, mine, from % kWarp);
          weight[u] = p.weights ? __shfl_sync(kAllLanes, mine_weight, from % kWarp) : 1.0f;
          const int32_t slot = cache.slot_of_row || cache.staged ? __shfl_sync(kAllLanes, mine_slot, from % kWarp) : -1;
          if (from >= n) id[u] = -1;
          if (id[u] >= 0 && active) {
            raw[u] = slot >= 0 ? Vec<Row>::LoadPastL1(SlotRow<Row>(cache, slot, p.dim) + d0)
                               : Vec<Row>::Load(table + id[u] * p.dim + d0);
          }
        }
#pragma unroll
        for (int u = 0; u < kIdsInFlight; ++u) {
          if (id[u] < 0) continue;
          ++count;
          if (active) Vec<Row>::Add(raw[u], weight[u], acc);
        }
      }
    }
    for (int distance = row_lanes; distance < kWarp; distance *= 2) {
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] += __shfl_xor_sync(kAllLanes, acc[e], distance);
      count += __shfl_xor_sync(kAllLanes, count, distance);
    }
    if (slice.count > 1) {  // every warp of the block takes part: the block holds one part's bags
      float* own = slice.sums + (warp * kWarp + lane) * kMaxVec;
      if (slice.index > 0) {
#pragma unroll
        for (int e = 0; e < V; ++e) own[e] = acc[e];
        if (lane == 0) slice.counts[warp] = count;
      }
      __syncthreads();
      if (slice.index == 0) {
        for (int other = 1; other < slice.count; ++other) {
#pragma unroll
          for (int e = 0; e < V; ++e) acc[e] += own[other * kWarp * kMaxVec + e];
          count += slice.counts[warp + other];
        }
      }
      __syncthreads();  // before the next columns' sums overwrite these
    }
    if (dst.stored() && active && group == 0 && slice.index == 0) {
      Store(dst, d0, acc, BagScale(p.combiner, count));
    }
  }
}

// The same, an element per lane (widths or addresses that do not allow 16-byte access).
template <typename Row, typename Id>
__device__ void PoolScalar(const Part& p, RowCacheView cache, int64_t lo, int64_t hi, int lane, Dst dst, int* error,
                           int step) {
  const Row* table = static_cast<const Row*>(p.src);
  const Id* ids = static_cast<const Id*>(p.ids);
  for (int64_t d = lane; d < p.dim; d += kWarp) {
    float acc = 0;
    int count = 0;
    for (int64_t j = lo; j < hi; ++j) {
      int64_t id = -1;
      int32_t slot = -1;
      Locate(static_cast<int64_t>(ids[j]), p, cache, d == lane, error, step, id, slot);
      if (id < 0) continue;
      const float v =
          slot >= 0 ? ToFloat(__ldcg(SlotRow<Row>(cache, slot, p.dim) + d)) : ToFloat(table[id * p.dim + d]);
      acc = fmaf(p.weights ? p.weights[j] : 1.0f, v, acc);
      ++count;
    }
    StoreOne(dst, d, acc * BagScale(p.combiner, count));
  }
}

// What a lane group loads for an absent id (past its bag, -1, or out of range) when every lane's
// pieces lie within the row: zeros, whose sums are those of the ids present (an fp32 sum never
// becomes -0 by adding +0, as it starts at +0). Two pieces a lane at most.
__device__ const uint4 kZeroPieces[2] = {};

// A lane group's id as PoolGrouped reads it (Checked), compared in 32 bits where it can be.
template <typename Id>
__device__ int GroupedId(Id id, const Part& p, bool report, int* error, int step) {
  if (sizeof(Id) > 4 || p.id_column >= 0)
    return static_cast<int>(Checked(static_cast<int64_t>(id), p, report, error, step));
  if (id >= static_cast<int32_t>(p.table_rows)) {  // grouped tables have under 2^31 rows
    if (report) ReportBadData(error, step);
    return -1;
  }
  return id < 0 ? -1 : static_cast<int>(id);
}

// A lane group's id as PoolGrouped reads it, with its slot as Locate gives them.
template <typename Id>
__device__ void GroupedLocate(Id v, const Part& p, RowCacheView cache, bool report, int* error, int step, int& id,
                              int& slot) {
  if (cache.staged && v < -1) {
    id = 0, slot = kStagedSlotFrom + static_cast<int>(-2 - v);
    return;
  }
  id = GroupedId(v, p, report, error, step);
  slot = cache.slots && id >= 0 ? SlotOf(cache, id) : -1;
}

// A lane group's slots first to first + kIds (of the row_lanes ids its lanes hold in `mine`, the
// first n its bag's) added to acc, every row loaded before any is added. An absent id adds zeros.
// A slot past kStagedSlotFrom is a staged row's (staged_columns: RowCacheView::staged).
template <int kIds, int kChunks, bool kWhole, typename Row>
__device__ void PoolIds(const char* columns, uint32_t row_bytes, const char* slot_columns, const char* staged_columns,
                        int mine, int mine_slot, float mine_weight, bool weighted, int first, int n, int row_lanes,
                        const bool (&active)[kChunks], float (&acc)[kChunks][Vec<Row>::kN], int& count) {
  constexpr int V = Vec<Row>::kN;
  typename Vec<Row>::Raw raw[kIds][kChunks];
  float weight[kIds];
#pragma unroll
  for (int u = 0; u < kIds; ++u) {
    int id = __shfl_sync(kAllLanes, mine, first + u, row_lanes);  // lanes past the group wrap round: no slot of its bag
    if (first + u >= n) id = -1;
    weight[u] = weighted ? __shfl_sync(kAllLanes, mine_weight, first + u, row_lanes) : 1.0f;
    if (id < 0) weight[u] = 0.0f;  // an absent id's zeros stay zeros, whatever another id's weight
    count += id >= 0;
    const char* row = columns + static_cast<uint64_t>(static_cast<uint32_t>(id)) * row_bytes;
    int slot = -1;
    if (slot_columns || staged_columns) slot = __shfl_sync(kAllLanes, mine_slot, first + u, row_lanes);
    if (first + u >= n) slot = -1;
    if (slot >= 0) {  // a cached row, read past L1 (RowCacheView), or a staged one
      row =
          slot >= kStagedSlotFrom
              ? staged_columns + static_cast<uint64_t>(static_cast<uint32_t>(slot - kStagedSlotFrom)) * kStagedUnitBytes
              : slot_columns + static_cast<uint64_t>(static_cast<uint32_t>(slot)) * row_bytes;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        raw[u][c] = Vec<Row>::Zero();
        if (kWhole || active[c]) raw[u][c] = Vec<Row>::LoadPastL1(reinterpret_cast<const Row*>(row) + c * V);
      }
    } else if constexpr (kWhole) {
      if (id < 0) row = reinterpret_cast<const char*>(kZeroPieces);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) raw[u][c] = Vec<Row>::Load(reinterpret_cast<const Row*>(row) + c * V);
    } else {
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        raw[u][c] = Vec<Row>::Zero();
        if (id >= 0 && active[c]) raw[u][c] = Vec<Row>::Load(reinterpret_cast<const Row*>(row) + c * V);
      }
    }
  }
#pragma unroll
  for (int u = 0; u < kIds; ++u) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) Vec<Row>::Add(raw[u][c], weight[u], acc[c]);
  }
}

// Bag [lo, hi) of part `p` into dst[0, dim) by one lane group of `row_lanes` lanes (the group-th of
// its warp; the other groups pool bags of their own), kChunks 16-byte pieces per lane. The group
// reads its bag's ids row_lanes at a time, a lane each, checks them there and hands them out by
// shuffles within the group, kIdsInFlight rows per lane in flight (one for a last odd id); each
// lane sums its columns in the ids' order, as the CPU does. Ids below 2^31 (Part::grouped), rows
// under 4 GiB apart. The whole warp takes every step, as many as its longest bag needs (a group
// past the batch has an empty bag and no store): its shuffles then need no convergence checks,
// and a slot past a group's bag adds a zero. kWhole: the row is a whole number of the group's
// pieces, so every load is unconditional (an absent id's from kZeroPieces); otherwise the loads
// are predicated.
template <int kIdsInFlight, int kChunks, bool kWhole, typename Row, typename Id>
__device__ void PoolGrouped(const Part& p, RowCacheView cache, int64_t lo, int64_t hi, int lane, int row_lanes, Dst dst,
                            int* error, int step) {
  constexpr int V = Vec<Row>::kN;
  const Id* ids = static_cast<const Id*>(p.ids);
  const auto row_bytes = static_cast<uint32_t>(p.dim * sizeof(Row));
  const int length = static_cast<int>(hi - lo);  // bags here are under 2^31 ids
  int span = length;                             // the warp's longest bag
  for (int distance = 1; distance < kWarp; distance *= 2) span = max(span, __shfl_xor_sync(kAllLanes, span, distance));
  for (int first_d = 0; first_d < p.dim; first_d += row_lanes * V * kChunks) {
    const int d0 = first_d + lane * V * kChunks;
    bool active[kChunks];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) active[c] = kWhole || d0 + c * V < p.dim;
    const char* columns = reinterpret_cast<const char*>(static_cast<const Row*>(p.src) + d0);
    const char* slot_columns =
        cache.slots ? reinterpret_cast<const char*>(static_cast<const Row*>(cache.slots) + d0) : nullptr;
    const char* staged_columns =
        cache.staged ? reinterpret_cast<const char*>(static_cast<const Row*>(cache.staged) + d0) : nullptr;
    float acc[kChunks][V] = {};
    int count = 0;
    for (int done = 0; done < span; done += row_lanes) {
      const int n = max(0, min(row_lanes, length - done));
      // A cached table: each lane looks up its own id's slot once, beside the others' (not once per
      // row, in a row's chain of loads); the slots go round with the ids.
      int mine = -1, mine_slot = -1;
      float mine_weight = 0.0f;
      if (lane < n) {
        GroupedLocate(ids[lo + done + lane], p, cache, first_d == 0, error, step, mine, mine_slot);
        if (p.weights) mine_weight = p.weights[lo + done + lane];
      }
      const int steps = min(row_lanes, span - done);
      for (int k = 0; k < steps; k += kIdsInFlight) {
        if (kIdsInFlight > 1 && k + 1 == steps) {
          PoolIds<1, kChunks, kWhole, Row>(columns, row_bytes, slot_columns, staged_columns, mine, mine_slot,
                                           mine_weight, p.weights, k, n, row_lanes, active, acc, count);
        } else {
          PoolIds<kIdsInFlight, kChunks, kWhole, Row>(columns, row_bytes, slot_columns, staged_columns, mine, mine_slot,
                                                      mine_weight, p.weights, k, n, row_lanes, active, acc, count);
        }
      }
    }
    if (!dst.stored()) continue;
    const float scale = BagScale(p.combiner, count);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (active[c]) Store(dst, d0 + c * V, acc[c], scale);
    }
  }
}

// A warp's bag: 16-byte pieces (PoolVector) or an element per lane. A large launch has no
// 16-byte part that is not grouped, and does not compile PoolVector (its registers).
template <int kIdsInFlight, bool kWarps, typename Row>
__device__ void Pool(const Part& p, RowCacheView cache, int64_t lo, int64_t hi, int lane, Dst dst, int* error, int step,
                     Slice slice) {
  if (kWarps && p.vector) {
    if (p.wide_ids)
      PoolVector<kIdsInFlight, Row, int64_t>(p, cache, lo, hi, lane, dst, error, step, slice);
    else
      PoolVector<kIdsInFlight, Row, int32_t>(p, cache, lo, hi, lane, dst, error, step, slice);
  } else {
    if (p.wide_ids)
      PoolScalar<Row, int64_t>(p, cache, lo, hi, lane, dst, error, step);
    else
      PoolScalar<Row, int32_t>(p, cache, lo, hi, lane, dst, error, step);
  }
}

}  // namespace rankd::cuda::bag_pool
