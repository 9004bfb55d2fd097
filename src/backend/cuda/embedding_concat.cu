// CUDA kernel of ConcatEmbeddingBags (cpu/embedding_bag.cc is the reference): every part of a
// concatenation in one launch. A large launch takes a lane group per bag, as many bags a warp as a
// table row leaves lane groups (Part::grouped); a small one does so for short bags, and takes a
// warp per (row, part) for the others, or several for a part whose bags are long (Part::split).
// A bag part pools its ids' table rows (negative ids skipped, an empty bag gives zeros, ids out
// of range reported through the executor's error word and skipped), each times its weight in a
// weighted sum; a copied part copies its row.
// Rows are read 16 bytes per lane (4 FP32 or 8 FP16/BF16 elements) where the table's width and
// alignment allow, and written straight into the part's columns of the output. This file lays
// out and launches the parts; embedding_pool.cuh pools a bag.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/embedding_pool.cuh"
#include "backend/cuda/kernels.h"

namespace rankd::cuda {
namespace {

using namespace bag_pool;

constexpr int kPartsPerLaunch = 43;  // keeps the launch's parameters under 4 KiB

struct Launch {
  Part parts[kPartsPerLaunch];
  int32_t first_block[kPartsPerLaunch + 1] = {};  // part p's blocks: [first_block[p], first_block[p + 1])
  int32_t part_count = 0;
  int64_t rows = 0;
  int64_t out_stride = 0;
  float* out = nullptr;           // null when the bf16 copy is written alone
  __nv_bfloat16* copy = nullptr;  // when set, the output rounded to bf16 as well (bf16_copies.h)
  int* error = nullptr;
  const RowCacheView* caches = nullptr;  // the model's table caches (Part::cache), in device memory
  const void* staged = nullptr;          // the run's staged rows (DeviceContext::staged_rows)
  const void* gathered = nullptr;        // the run's gathered rows (DeviceContext::gathered_rows)
  int step = 0;
};
static_assert(sizeof(Launch) <= 4096, "a launch's parameters must stay under 4 KiB");

// How a launch trades rows in flight per lane for warps per SM (the register limit that lets
// kMinBlocks blocks share an SM). Measured on the H100 with ncu (docs/log/benchmarks.md, W1's
// concatenation from bf16 tables): a small launch fills few SMs and wants each warp's chain of
// loads short (long bags split; at 512 pairs 26 µs with three blocks an SM against 41 µs with
// two); a large one fills every SM, and four blocks an SM gave 0.95 ms at 32,768 pairs against
// 1.16 with three, 1.21 with six (two rows in flight) and 1.61 with two (eight rows in flight),
// a warp per bag. With a lane group per bag (H200, bf16 tables, the bf16 copy alone) it took
// 0.566 ms with four blocks an SM (64 registers, a few spilled), 0.640 with three (80, none), and
// 0.904 with a warp per bag: half the instructions, as a warp no longer idles half its lanes on
// a short bag nor sums its halves by shuffles. Two 16-byte pieces a lane (four bags a warp for 128
// bf16 columns, two for 128 fp32) then took 0.382 ms against 0.527 with one, and 0.578 against
// 0.880 from fp32 tables. With short bags grouped in small launches too (H200, W1, bf16 tables):
// at 512 pairs 15.5 µs with four blocks an SM, 16.3 with three, 19.9 with two; at 64 pairs 10.7
// with two, 11.6 with three, 12.9 with four (eight rows in flight with two blocks: 20.0 and 10.6).
// Lane groups stepping together with lean steps (H200, W1 at 32,768 pairs, bf16 tables) took
// 0.302 ms against 0.382; each warp then taking two tiles of bags (kTiles) took
// 0.280, against 0.305 with four. Eight rows in flight (four blocks an SM or three) and four with
// three blocks were slower: 0.380–0.385 against 0.318 (one tile, before the odd last id's step).
template <int kInFlight, int kMinBlocksPerSm, bool kWarpBags, int kTiles>
struct Shape {
  static constexpr int kIdsInFlight = kInFlight;
  static constexpr int kMinBlocks = kMinBlocksPerSm;
  // 16-byte bags a warp (or several, split) pools: compiled only where a launch may have them.
  static constexpr bool kWarps = kWarpBags;
  // Tiles of BagsPerWarp bags a warp of a grouped part takes in turn (a lane group one bag of each).
  static constexpr int kBagTiles = kTiles;
};
using TinyLaunch = Shape<4, 2, true, 1>;
using SmallLaunch = Shape<4, 4, true, 1>;
using LargeLaunch = Shape<4, 4, false, 2>;

// Part p's table cache, if it has one, with the run's staged rows where its ids are placed; the
// gathered rows alone where they are gathered (a table in host memory has no cache).
__device__ RowCacheView CacheOf(const Launch& launch, const Part& p) {
  if (p.placed == Placed::kGatheredOnDevice) return RowCacheView{nullptr, nullptr, launch.gathered};
  if (p.cache < 0) return RowCacheView{};
  RowCacheView view = launch.caches[p.cache];
  if (p.placed == Placed::kStagedByHost) view.staged = launch.staged;
  return view;
}

// Bag b's ids [lo, hi) in part p's ids; bad offsets are reported (when `report`) and give an empty bag.
__device__ void BagRange(const Part& p, int64_t b, bool report, int* error, int step, int64_t& lo, int64_t& hi) {
  lo = p.offsets ? p.offsets[b] : b * p.width;
  hi = p.offsets ? p.offsets[b + 1] : (b + 1) * p.width;
  if (p.id_column >= 0) {
    lo += p.id_column;
    hi = lo + 1;
  }
  if (lo < 0 || hi < lo || hi > p.n_ids) {
    if (report) ReportBadData(error, step);
    lo = hi = 0;
  }
}

// The part whose blocks hold this block: the last with first_block <= blockIdx.x.
__device__ int PartOfBlock(const Launch& launch) {
  const auto block = static_cast<int32_t>(blockIdx.x);
  int lo = 0, hi = launch.part_count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (launch.first_block[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// PoolGrouped for a part's row pieces a lane, id width and whole rows (each chosen on the host).
template <int kIds, int kChunks, typename Row, typename Id>
__device__ void PoolGroupedRows(const Launch& launch, const Part& p, int64_t lo, int64_t hi, int lane, int row_lanes,
                                Dst dst) {
  if (p.whole)
    PoolGrouped<kIds, kChunks, true, Row, Id>(p, CacheOf(launch, p), lo, hi, lane, row_lanes, dst, launch.error,
                                              launch.step);
  else
    PoolGrouped<kIds, kChunks, false, Row, Id>(p, CacheOf(launch, p), lo, hi, lane, row_lanes, dst, launch.error,
                                               launch.step);
}

// Two pieces a lane halve the lanes a row takes, so twice the bags share a warp's instructions;
// half the rows in flight a lane keep the registers (and the rows in flight a warp) as before.
template <typename S, int kChunks, typename Row>
__device__ void PoolGroupedPieces(const Launch& launch, const Part& p, int64_t lo, int64_t hi, int lane, int row_lanes,
                                  Dst dst) {
  constexpr int kIds = S::kIdsInFlight / kChunks;
  if (p.wide_ids)
    PoolGroupedRows<kIds, kChunks, Row, int64_t>(launch, p, lo, hi, lane, row_lanes, dst);
  else
    PoolGroupedRows<kIds, kChunks, Row, int32_t>(launch, p, lo, hi, lane, row_lanes, dst);
}

template <typename S, typename Row>
__device__ void PoolGroupedPart(const Launch& launch, const Part& p, int64_t lo, int64_t hi, int lane, int row_lanes,
                                Dst dst) {
  if (p.chunks_per_lane == 2)
    PoolGroupedPieces<S, 2, Row>(launch, p, lo, hi, lane, row_lanes, dst);
  else
    PoolGroupedPieces<S, 1, Row>(launch, p, lo, hi, lane, row_lanes, dst);
}

template <typename S>
__global__ void __launch_bounds__(kWarp* kWarpsPerBlock, S::kMinBlocks)
    ConcatKernel(const __grid_constant__ Launch launch) {
  __shared__ float sums[kWarpsPerBlock * kWarp * kMaxVec];
  __shared__ int counts[kWarpsPerBlock];
  const int part = PartOfBlock(launch);
  const Part& p = launch.parts[part];
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  if (p.grouped) {
    const int row_lanes = 1 << p.group_shift, group = lane >> p.group_shift, group_lane = lane & (row_lanes - 1);
    const int64_t warp_bags = static_cast<int64_t>(BagsPerWarp(p)) * S::kBagTiles;
    const int64_t warp_first =
        (static_cast<int64_t>(blockIdx.x - launch.first_block[part]) * kWarpsPerBlock + warp) * warp_bags;
#pragma unroll 1
    for (int tile = 0; tile < S::kBagTiles; ++tile) {
      const int64_t first_bag = warp_first + static_cast<int64_t>(tile) * BagsPerWarp(p);
      if (first_bag >= launch.rows) return;  // the whole warp: PoolGrouped's shuffles take all its lanes
      const int64_t b = first_bag + group;
      const bool real = b < launch.rows;
      int64_t lo = 0, hi = 0;
      if (real) BagRange(p, b, group_lane == 0, launch.error, launch.step, lo, hi);
      const int64_t at = b * launch.out_stride + p.column;
      const Dst dst = real ? Dst{launch.out ? launch.out + at : nullptr, launch.copy ? launch.copy + at : nullptr}
                           : Dst{nullptr, nullptr};
      switch (p.row_type) {
        case RowType::kF32:
          PoolGroupedPart<S, float>(launch, p, lo, hi, group_lane, row_lanes, dst);
          break;
        case RowType::kF16:
          PoolGroupedPart<S, __half>(launch, p, lo, hi, group_lane, row_lanes, dst);
          break;
        case RowType::kBF16:
          PoolGroupedPart<S, __nv_bfloat16>(launch, p, lo, hi, group_lane, row_lanes, dst);
          break;
      }
    }
    return;
  }
  const Slice slice{warp % p.split, p.split, sums, counts};
  const int64_t b =
      static_cast<int64_t>(blockIdx.x - launch.first_block[part]) * (kWarpsPerBlock / p.split) + warp / p.split;
  const bool real = b < launch.rows;
  if (!real && p.split == 1) return;  // a split bag's warps all reach its barriers
  const int64_t at = b * launch.out_stride + p.column;
  const Dst dst = real ? Dst{launch.out ? launch.out + at : nullptr, launch.copy ? launch.copy + at : nullptr}
                       : Dst{nullptr, nullptr};
  if (p.copied) {
    const float* src = static_cast<const float*>(p.src) + b * p.dim;
    if (p.vector) {
      for (int64_t d = static_cast<int64_t>(lane) * 4; d < p.dim; d += kWarp * 4) {
        const float4 x = *reinterpret_cast<const float4*>(src + d);
        const float v[4] = {x.x, x.y, x.z, x.w};
        Store(dst, d, v, 1.0f);
      }
    } else {
      for (int64_t d = lane; d < p.dim; d += kWarp) StoreOne(dst, d, src[d]);
    }
    return;
  }
  int64_t lo = 0, hi = 0;
  if (real) BagRange(p, b, lane == 0, launch.error, launch.step, lo, hi);
  switch (p.row_type) {
    case RowType::kF32:
      Pool<S::kIdsInFlight, S::kWarps, float>(p, CacheOf(launch, p), lo, hi, lane, dst, launch.error, launch.step,
                                              slice);
      break;
    case RowType::kF16:
      Pool<S::kIdsInFlight, S::kWarps, __half>(p, CacheOf(launch, p), lo, hi, lane, dst, launch.error, launch.step,
                                               slice);
      break;
    case RowType::kBF16:
      Pool<S::kIdsInFlight, S::kWarps, __nv_bfloat16>(p, CacheOf(launch, p), lo, hi, lane, dst, launch.error,
                                                      launch.step, slice);
      break;
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Bags (rows times parts) up to which a launch splits long bags and takes TinyLaunch's or
// SmallLaunch's shape, and past which LargeLaunch's. Splitting shortens a small batch's longest
// chain of loads, but costs a large one throughput (H100, ncu, W1's concatenation: 13,312 bags at
// 512 pairs, 29 µs split against 36; 851,968 at 32,768 pairs, 1.32 ms against 1.16).
constexpr int64_t kSplitBagsUpTo = 16384;
// Bags up to which a small launch takes TinyLaunch's shape: few blocks, each warp's rows in flight
// not limited by registers (W1: 1,664 bags at 64 pairs, 13,312 at 512).
constexpr int64_t kTinyBagsUpTo = 4096;

// Bags of at most this many ids on average go to lane groups in a small launch too: a warp then
// pools several at once, where a warp per bag leaves most of its lanes and loads idle and the
// launch takes more waves of blocks. H200, ncu, W1's concatenation from bf16 tables (most of its
// 26 features have 1 to 12 ids a bag): at 512 pairs 16.4 µs with bags of up to 4, 8 or 12 ids
// grouped against 25.2 with none; at 64 pairs 11.5–11.7 against 11.9.
constexpr double kGroupedBagsUpTo = 8;

// A small launch past kTinyBagsUpTo whose blocks would fill more than one wave at its four an SM
// (W1 at 512 pairs: 1,168 blocks for 528 places, 704 so) is laid out again for half a bag's ids: a warp
// takes twice the ids of a long bag, and bags of up to twice kGroupedBagsUpTo go to lane groups,
// for fewer blocks. H200, W1 at 512 pairs, bf16 tables, captured (traced): 14.6–14.7 µs against
// 17.0–17.1 with bags drawn up to their feature's length, and 14.7–14.8 against 17.0 with every
// bag at its length. A tiny launch keeps its warps' chains short: at 64 pairs the halved layout
// took 6.8–7.7 µs against 5.5, at one pair 5.0 against 4.0 (docs/log/benchmarks.md).
constexpr double kSmallLaunchIdsScale = 0.5;

// Warps per bag for bags of about `ids` ids: kChunk ids or more each, so that a long bag is not one
// warp's chain of loads.
uint8_t SplitFor(double ids) {
  int split = 1;
  while (split < kWarpsPerBlock && split * kChunk < ids) split *= 2;
  return static_cast<uint8_t>(split);
}

// The node's attributes, read once per plan step rather than on every run.
struct Layout final : KernelState {
  std::vector<int64_t> counts, modes, columns, floors;
  int multiprocessors = 0;
};

StatusOr<std::shared_ptr<const KernelState>> PrepareLayout(const Node& node) {
  auto layout = std::make_shared<Layout>();
  int device = 0;
  RANKD_CUDA_RETURN(cudaGetDevice(&device));
  RANKD_CUDA_RETURN(cudaDeviceGetAttribute(&layout->multiprocessors, cudaDevAttrMultiProcessorCount, device));
  layout->counts = node.GetInts("parts");
  layout->modes = node.GetInts("modes");
  layout->columns = node.GetInts("columns");
  layout->floors = node.GetInts("floors");
  return std::shared_ptr<const KernelState>(std::move(layout));
}

// The parts of a launch of `k` over `rows` rows, with their splits and lane groups chosen for
// `scale` times a bag's ids, and each part's ids a bag on average (0 for a copied part).
Status LayOutParts(const KernelArgs& k, const Layout& layout, int64_t rows, bool out_vector, bool split_allowed,
                   double scale, std::vector<Part>& parts, std::vector<double>& ids_per_part) {
  const std::vector<int64_t>& counts = layout.counts;
  const std::vector<int64_t>& modes = layout.modes;
  const std::vector<int64_t>& columns = layout.columns;
  parts.clear();
  ids_per_part.clear();
  int first = 0;
  int64_t column = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    int count = static_cast<int>(counts[i]);
    const Tensor& src = k.In(first);
    Part p;
    p.src = src.raw();
    p.dim = static_cast<int32_t>(src.dim(1));
    p.column = static_cast<int32_t>(column);
    double ids_per_bag = 0;
    if (count == 1) {
      p.copied = true;
      p.vector = out_vector && column % 4 == 0 && p.dim % 4 == 0 && Aligned16(p.src);
    } else {
      const Tensor& ids = k.In(first + 1);
      p.ids = ids.raw();
      p.offsets = count >= 3 ? k.In(first + 2).data<int64_t>() : nullptr;
      p.table_rows = src.dim(0);
      p.n_ids = ids.size();
      if (count == 4) {  // a weighted sum: the bags read only ids that have a weight
        p.weights = k.In(first + 3).data<float>();
        p.n_ids = std::min(p.n_ids, k.In(first + 3).size());
      }
      p.width = count >= 3 ? 0 : static_cast<int32_t>(ids.dim(1));
      p.wide_ids = ids.dtype() != DType::kI32;
      p.combiner = static_cast<uint8_t>(modes[i]);
      p.id_column = columns.empty() ? -1 : static_cast<int32_t>(columns[i]);
      if (!layout.floors.empty()) p.id_floor = layout.floors[i];
      p.cache = static_cast<int16_t>(k.device->row_caches ? k.device->row_caches->Find(p.src) : -1);
      auto among = [&](const std::vector<const void*>* at) {
        return at && std::binary_search(at->begin(), at->end(), p.ids);
      };
      if (p.cache >= 0 && among(k.device->placed_ids))
        p.placed = Placed::kStagedByHost;
      else if (among(k.device->gathered_ids))
        p.placed = Placed::kGatheredOnDevice;
      int v = 4;
      switch (src.dtype()) {
        case DType::kF32:
          p.row_type = RowType::kF32;
          break;
        case DType::kF16:
          p.row_type = RowType::kF16, v = 8;
          break;
        case DType::kBF16:
          p.row_type = RowType::kBF16, v = 8;
          break;
        default:
          return Internal(k.node.Describe() + ": no cuda kernel for " + DTypeName(src.dtype()) + " tables");
      }
      p.vector = out_vector && column % 4 == 0 && p.dim % v == 0 && Aligned16(p.src);
      ids_per_bag = p.id_column >= 0 ? 1.0
                    : count >= 3     ? static_cast<double>(p.n_ids) / static_cast<double>(rows)
                                     : p.width;
      const bool groupable = p.vector && p.table_rows <= std::numeric_limits<int32_t>::max() &&
                             p.dim <= (1 << 24);  // rows under 4 GiB apart
      const double planned = ids_per_bag * scale;
      if (groupable && (!split_allowed || planned <= kGroupedBagsUpTo)) {
        p.grouped = true;  // lane groups
        const int64_t chunks = p.dim / v;
        p.chunks_per_lane = chunks >= 16 ? 2 : 1;  // rows of 16 pieces or more (128 bf16, 64 fp32)
        const int row_lanes = RowLanes((chunks + p.chunks_per_lane - 1) / p.chunks_per_lane);
        while ((1 << p.group_shift) < row_lanes) ++p.group_shift;
        p.whole = p.dim % (row_lanes * v * p.chunks_per_lane) == 0;
      } else if (p.vector && split_allowed) {
        if (p.id_column < 0) p.split = SplitFor(planned);
      } else {
        p.vector = false;  // LargeLaunch: an element a lane
      }
    }
    column += p.dim;
    first += count;
    if (p.dim > 0) parts.push_back(p), ids_per_part.push_back(ids_per_bag);
  }
  return Status::Ok();
}

Status ConcatEmbeddingBags(const KernelArgs& k) {
  const auto* layout = dynamic_cast<const Layout*>(k.state);
  if (!layout) return Internal(k.node.Describe() + ": run without its prepared layout");
  Tensor& out = k.Out(0);
  int64_t rows = out.dim(0), stride = out.dim(1);
  if (rows == 0 || stride == 0) return Status::Ok();
  // 16-byte fp32 stores, and 8-byte stores to the bf16 copy.
  bool out_vector = stride % 4 == 0 && Aligned16(out.raw()) && reinterpret_cast<uintptr_t>(k.device->bf16_out) % 8 == 0;
  const int64_t bags = rows * static_cast<int64_t>(layout->counts.size());
  const bool split_allowed = bags <= kSplitBagsUpTo;
  std::vector<Part> parts;
  std::vector<double> ids_per_part;
  // The tiles of BagsPerWarp bags a warp of a grouped part takes: the launch's shape's.
  const int64_t tiles = bags <= kTinyBagsUpTo ? TinyLaunch::kBagTiles
                        : split_allowed       ? SmallLaunch::kBagTiles
                                              : LargeLaunch::kBagTiles;
  auto blocks_of = [&](const Part& part) {
    const int64_t bags_per_block =
        part.grouped ? kWarpsPerBlock * BagsPerWarp(part) * tiles : kWarpsPerBlock / part.split;
    return (rows + bags_per_block - 1) / bags_per_block;
  };
  RANKD_RETURN_IF_ERROR(LayOutParts(k, *layout, rows, out_vector, split_allowed, 1.0, parts, ids_per_part));
  if (bags > kTinyBagsUpTo && split_allowed) {
    int64_t blocks = 0;
    for (const Part& part : parts) blocks += blocks_of(part);
    if (blocks > int64_t{layout->multiprocessors} * SmallLaunch::kMinBlocks) {
      RANKD_RETURN_IF_ERROR(
          LayOutParts(k, *layout, rows, out_vector, split_allowed, kSmallLaunchIdsScale, parts, ids_per_part));
    }
  }
  // The parts with the longest bags take the first blocks, so that the launch does not end on a
  // wave of their long-running blocks beside idle SMs (each part writes its own columns, so the
  // order changes no result). H200, W1 at 32,768 pairs, whose 100-id part is the 21st of 26:
  // 276 µs against 278 in the parts' own order.
  std::vector<size_t> order(parts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids_per_part[a] > ids_per_part[b]; });
  std::vector<Part> ordered;
  ordered.reserve(parts.size());
  for (size_t i : order) ordered.push_back(parts[i]);
  parts = std::move(ordered);
  for (size_t begin = 0; begin < parts.size(); begin += kPartsPerLaunch) {
    Launch launch;
    size_t n = std::min(parts.size() - begin, static_cast<size_t>(kPartsPerLaunch));
    std::copy(parts.begin() + static_cast<std::ptrdiff_t>(begin),
              parts.begin() + static_cast<std::ptrdiff_t>(begin + n), launch.parts);
    launch.part_count = static_cast<int32_t>(n);
    launch.rows = rows;
    launch.out_stride = stride;
    launch.out = k.device->bf16_out && k.device->bf16_out_alone ? nullptr : out.data<float>();
    launch.copy = static_cast<__nv_bfloat16*>(k.device->bf16_out);
    launch.error = k.device->error;
    launch.caches = k.device->row_caches ? k.device->row_caches->device_views : nullptr;
    launch.staged = k.device->staged_rows;
    launch.gathered = k.device->gathered_rows;
    launch.step = k.step;
    int64_t blocks = 0;
    for (size_t i = 0; i < n; ++i) {
      blocks += blocks_of(launch.parts[i]);
      if (blocks > std::numeric_limits<int32_t>::max())
        return Internal(k.node.Describe() + ": too many rows for one launch");
      launch.first_block[i + 1] = static_cast<int32_t>(blocks);
    }
    if (bags <= kTinyBagsUpTo) {
      ConcatKernel<TinyLaunch><<<static_cast<unsigned>(blocks), kWarp * kWarpsPerBlock, 0, k.device->stream>>>(launch);
    } else if (split_allowed) {
      ConcatKernel<SmallLaunch><<<static_cast<unsigned>(blocks), kWarp * kWarpsPerBlock, 0, k.device->stream>>>(launch);
    } else {
      ConcatKernel<LargeLaunch><<<static_cast<unsigned>(blocks), kWarp * kWarpsPerBlock, 0, k.device->stream>>>(launch);
    }
  }
  return Launched(k);
}

}  // namespace

void AppendEmbeddingConcatKernels(KernelTable& out) {
  out["ConcatEmbeddingBags"] = Kernel(ConcatEmbeddingBags, PrepareLayout);
}

}  // namespace rankd::cuda
