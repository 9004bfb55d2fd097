// CudaExecutor's input staging: the host inputs packed into the pinned staging buffer (ids
// narrowed or widened to their slots, ragged tails filled with -1) on the calling thread and the helping pool's, and
// for a large uncaptured run sent to the device in chunks as they are packed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "backend/cuda/mapped_copy.h"
#include "common/helping_pool.h"
#include "common/host_copies.h"
#include "common/narrow_ids.h"
#include "common/parallel.h"
#include "compile/narrowable_ids.h"
#include "compile/plan.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/op_profile.h"

namespace rankd::cuda {
namespace {

// Input staging is split into pieces this large, so that W1's longest bags (a fifth of a request's
// ids) spread over the threads that pack them.
constexpr size_t kPieceBytes = size_t{64} << 10;
// Staging buffers of fewer bytes are packed by the calling thread alone: at W1's 64 pairs (72 KB,
// 53 pieces) the helpers' claims cost more than they saved (H200 host: 8.6 to 10.2 µs against
// 7.5); at 512 pairs (572 KB) they took the packing from 35 to 38 µs down to 21 to 22.
constexpr size_t kHelpedStagingBytes = size_t{256} << 10;
// Uncaptured runs with at least this many input bytes copy them in chunks of about kChunkBytes,
// each sent to the device as soon as it is packed, so the copy overlaps the packing.
constexpr size_t kPipelinedBytes = size_t{16} << 20;
constexpr size_t kChunkBytes = size_t{8} << 20;
// The ids get a gather of their own (SplitLateInputs) where the floats are at most this fraction
// of their bytes: W1's dense features are 3% of a request's input bytes.
constexpr size_t kLateGatherRatio = 4;

void Pack(const StagingPiece& piece, StagedRoom& room) {
  if (piece.placed) {
    const auto start = std::chrono::steady_clock::now();
    const CudaRowCache& cache = *piece.placed;
    const PlacedCounts done =
        PlaceIds({&cache.cached_rows(), cache.host_table(), cache.row_bytes()}, piece.from, piece.wide_from, piece.to,
                 piece.wide_from && piece.repack == Repack::kCopy, piece.bytes / (piece.wide_from ? 8 : 4), room);
    cache.CountGathered(done.staged, done.unstaged);
    const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    if (piece.gather_ns) piece.gather_ns->fetch_add(static_cast<uint64_t>(took.count()), std::memory_order_relaxed);
    return;
  }
  switch (piece.repack) {
    case Repack::kCopy:
      std::memcpy(piece.to, piece.from, piece.bytes);
      break;
    case Repack::kNarrow:
      NarrowIds(reinterpret_cast<const int64_t*>(piece.from), reinterpret_cast<int32_t*>(piece.to), piece.bytes / 8);
      break;
  }
}

// Where a piece that starts `done` bytes into its input's data starts in its slot.
size_t SlotOffset(size_t done, Repack repack) { return repack == Repack::kNarrow ? done / 2 : done; }

}  // namespace

Repack CudaExecutor::RepackOf(const Binding& b, size_t i, const Tensor& in) {
  if (b.narrowed[i] && in.dtype() == DType::kI64) return Repack::kNarrow;
  return Repack::kCopy;
}

size_t CudaExecutor::SlotBytes(const Tensor& in, Repack repack) { return SlotOffset(in.bytes(), repack); }

Status CudaExecutor::FillTails(Binding& b, std::span<const Tensor> inputs) {
  if (inputs.size() != b.in_bytes.size()) {
    return InvalidArgument("the plan takes " + std::to_string(b.in_bytes.size()) + " inputs, got " +
                           std::to_string(inputs.size()));
  }
  // What each slot holds after its data is known only if this binding staged last; otherwise
  // the whole tail is filled.
  const bool known = tails_owner_ == &b, fill = !b.copy_kernels;
  b.tail_from.resize(inputs.size(), 0);
  auto* staged = static_cast<uint8_t*>(staged_inputs_.get());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    const size_t bytes = SlotBytes(in, RepackOf(b, i, in));
    if (bytes > b.in_bytes[i]) {
      return InvalidArgument("input " + std::to_string(i) + " holds " + std::to_string(bytes) +
                             " bytes where the plan has room for " + std::to_string(b.in_bytes[i]));
    }
    const bool ids = in.dtype() == DType::kI64 || in.dtype() == DType::kI32;
    if (bytes < b.in_bytes[i] && (in.rank() != 1 || !(ids || (in.dtype() == DType::kF32 && b.ragged_values[i])))) {
      return InvalidArgument("input " + std::to_string(i) +
                             " is shorter than the plan's and is not a ragged input's ids (nor its per-id values)");
    }
    if (!fill) continue;
    const size_t filled_from = known ? b.tail_from[i] : b.in_bytes[i];
    // Slots from `bytes` on must read -1 (all bits set at either width); those past the last
    // tail filled still do.
    if (bytes < filled_from) std::memset(staged + b.in_offsets[i] + bytes, 0xff, filled_from - bytes);
    b.tail_from[i] = bytes;
  }
  if (fill) tails_owner_ = &b;
  return Status::Ok();
}

std::vector<StagingPiece> CudaExecutor::ListSources(Binding& b, std::span<const Tensor> inputs) {
  auto* staged = static_cast<uint8_t*>(staged_inputs_.get());
  auto* staged_device = static_cast<const uint8_t*>(staged_inputs_.device());
  auto* table = reinterpret_cast<GatherTable*>(staged + b.sources_at);
  InputSource* sources = SourcesOf(table);
  // A deferred input's parts are read where they lie (each a source) where the table has room;
  // every other deferred input is written now, before anything reads it.
  std::vector<const std::vector<Tensor>*> parts_of(inputs.size(), nullptr);
  if (deferred_) {
    size_t room = static_cast<size_t>(b.max_sources) - inputs.size();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<Tensor>* parts = b.placed[i] ? nullptr : deferred_->Find(inputs[i].raw(), inputs[i].bytes());
      if (!parts || parts->size() - 1 > room) continue;
      const auto readable = [](const Tensor& t) { return t.bytes() == 0 || GatherablePart(t); };
      if (!std::all_of(parts->begin(), parts->end(), readable)) continue;
      room -= parts->size() - 1;
      parts_of[i] = deferred_->Take(inputs[i].raw(), inputs[i].bytes());
    }
    deferred_->WriteRest();
  }
  std::vector<StagingPiece> pieces;
  uint32_t count = 0;
  for (size_t i : b.slot_order) {
    const Tensor& in = inputs[i];
    const Repack repack = RepackOf(b, i, in);
    if (parts_of[i]) {
      const uint32_t first = count;
      uint64_t at = b.in_offsets[i];
      for (const Tensor& part : *parts_of[i]) {
        if (part.bytes() == 0) continue;
        const size_t fills = SlotBytes(part, repack);
        sources[count++] = {part.raw(), part.bytes(), at, fills, repack == Repack::kNarrow, 0};
        at += fills;
      }
      if (count == first) {  // no part has ids: the slot is all -1
        sources[count++] = {staged_device + b.in_offsets[i], 0, b.in_offsets[i], b.in_bytes[i], 0, 0};
      } else {  // the last part's source fills the rest of the slot with -1
        sources[count - 1].to_bytes = b.in_offsets[i] + b.in_bytes[i] - sources[count - 1].to;
      }
      continue;
    }
    const void* from = in.raw();
    // Read where it lies, narrowed by the kernel if need be (a GPU reads pinned memory in place),
    // unless its ids are placed.
    if (in.bytes() > 0 && reinterpret_cast<uintptr_t>(from) % 16 == 0 && in.location().kind == MemoryKind::kPinned &&
        !b.placed[i]) {
      sources[count++] = {from, in.bytes(), b.in_offsets[i], b.in_bytes[i], repack == Repack::kNarrow, 0};
      continue;
    }
    const size_t bytes = SlotBytes(in, repack);
    sources[count++] = {staged_device + b.in_offsets[i], bytes, b.in_offsets[i], b.in_bytes[i], 0, 0};
    if (bytes > 0) {
      pieces.push_back({staged + b.in_offsets[i], static_cast<const uint8_t*>(from), in.bytes(), repack, b.placed[i],
                        in.dtype() == DType::kI64});
    }
  }
  WriteTableCounts(b, count);
  if (!pieces.empty()) tails_owner_ = nullptr;  // slots packed without their tails
  return pieces;
}

void CudaExecutor::ListStagedSources(const Binding& b) {
  auto* staged_device = static_cast<const uint8_t*>(staged_inputs_.device());
  InputSource* sources =
      SourcesOf(reinterpret_cast<GatherTable*>(static_cast<uint8_t*>(staged_inputs_.get()) + b.sources_at));
  uint32_t count = 0;
  for (size_t i : b.slot_order) {
    sources[count++] = {staged_device + b.in_offsets[i], b.in_bytes[i], b.in_offsets[i], b.in_bytes[i], 0, 0};
  }
  WriteTableCounts(b, count);
}

void CudaExecutor::WriteTableCounts(const Binding& b, uint32_t count) {
  auto* table = reinterpret_cast<GatherTable*>(static_cast<uint8_t*>(staged_inputs_.get()) + b.sources_at);
  const InputSource* sources = SourcesOf(table);
  uint32_t late = count;
  if (b.late_gather) {
    late = 0;
    while (late < count && sources[late].to < b.late_from) ++late;
  }
  table->count = count;
  table->late = late;
}

void CudaExecutor::SplitLateInputs(const Plan& plan, Binding& b) {
  const size_t count = b.in_offsets.size();
  b.slot_order.resize(count);
  for (size_t i = 0; i < count; ++i) b.slot_order[i] = i;
  if (!b.copy_kernels || !LateGather()) return;
  const auto& values = plan.values();
  std::vector<bool> late(count);
  std::vector<size_t> room(count);  // each slot's bytes, alignment included
  size_t early_bytes = 0, late_bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    const DType dtype = values[static_cast<size_t>(plan.graph().inputs[i])].dtype;
    late[i] = dtype == DType::kI64 || dtype == DType::kI32;
    room[i] = (i + 1 < count ? b.in_offsets[i + 1] : b.in_total) - b.in_offsets[i];
    (late[i] ? late_bytes : early_bytes) += room[i];
  }
  // A few bytes of floats, a step that reads them and no ids.
  if (early_bytes == 0 || late_bytes == 0 || early_bytes * kLateGatherRatio > late_bytes) return;
  const std::vector<int> input_of = GraphInputOf(b, values.size());
  const bool any_early_step = std::any_of(plan.steps().begin(), plan.steps().end(), [&](const PlanStep& step) {
    bool early = false, ids = false;
    for (int v : step.inputs) {
      const int input = v >= 0 ? input_of[static_cast<size_t>(v)] : -1;
      if (input >= 0) (late[static_cast<size_t>(input)] ? ids : early) = true;
    }
    return early && !ids;
  });
  if (!any_early_step) return;
  size_t at = 0, entry = 0;
  for (int pass = 0; pass < 2; ++pass) {  // floats, then ids
    if (pass == 1) b.late_from = at;
    for (size_t i = 0; i < count; ++i) {
      if (late[i] != (pass == 1)) continue;
      b.in_offsets[i] = at;
      b.slot_order[entry++] = i;
      at += room[i];
    }
  }
  b.late_gather = true;
}

Status CudaExecutor::GatherInputs(const Binding& b, GatherPart part) {
  const auto* table =
      reinterpret_cast<const GatherTable*>(static_cast<uint8_t*>(staged_inputs_.device()) + b.sources_at);
  int* clear = b.outputs_pinned ? nullptr : ctx_.error;  // in pinned memory the host clears it (StageInputs)
  Status gathered;
  switch (part) {
    case GatherPart::kAll:
      gathered = GatherByKernel(table, part, b.max_sources, io_.get(), 0, b.in_total, clear, ctx_.stream);
      break;
    case GatherPart::kFloats:
      gathered = GatherByKernel(table, part, b.max_sources, io_.get(), 0, b.late_from, clear, ctx_.stream);
      break;
    case GatherPart::kIds:
      gathered = GatherByKernel(table, part, b.max_sources, io_.get(), b.late_from, b.in_total, nullptr, ctx_.stream);
      break;
  }
  if (gathered.ok()) NoteCopyNode();
  return gathered;
}

StatusOr<bool> CudaExecutor::StageInputs(Binding& b, std::span<const Tensor> inputs) {
  auto staging_start = std::chrono::steady_clock::now();
  RANKD_RETURN_IF_ERROR(FillTails(b, inputs));
  auto* staged = static_cast<uint8_t*>(staged_inputs_.get());
  if (!b.copy_kernels) std::memset(staged + b.in_total, 0, sizeof(int));     // the error word the input copy clears
  if (b.outputs_pinned) std::memset(staged_outputs_.get(), 0, sizeof(int));  // the error word the steps write
  staged_room_.host = static_cast<uint8_t*>(staged_rows_.get());  // the placed ids' staged rows (placed_ids.h)
  staged_room_.units = b.staged_units;
  staged_room_.used.store(0, std::memory_order_relaxed);
  std::vector<StagingPiece> whole;  // the inputs to pack, in the staging buffer's order
  if (b.copy_kernels) {
    whole = ListSources(b, inputs);
  } else {
    // A deferred input's parts are packed straight into its slot, each after the one before (one
    // copy, not a merge and then a packing); the others are written first (placed ids).
    std::vector<const std::vector<Tensor>*> parts_of(inputs.size(), nullptr);
    if (deferred_) {
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!b.placed[i]) parts_of[i] = deferred_->Take(inputs[i].raw(), inputs[i].bytes());
      }
      deferred_->WriteRest();
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Repack repack = RepackOf(b, i, inputs[i]);
      if (!parts_of[i]) {
        whole.push_back({staged + b.in_offsets[i], static_cast<const uint8_t*>(inputs[i].raw()), inputs[i].bytes(),
                         repack, b.placed[i], inputs[i].dtype() == DType::kI64});
        continue;
      }
      size_t done = 0;
      for (const Tensor& part : *parts_of[i]) {
        if (part.bytes() == 0) continue;
        whole.push_back({staged + b.in_offsets[i] + SlotOffset(done, repack), static_cast<const uint8_t*>(part.raw()),
                         part.bytes(), repack, nullptr, part.dtype() == DType::kI64});
        done += part.bytes();
      }
    }
  }
  // Per input whose ids are placed, the host time its pieces took (the cache's Gathered::seconds);
  // none for a binding that places no ids (every run with resident tables).
  std::vector<std::atomic<uint64_t>> gather_ns(b.placed_inputs.empty() ? 0 : whole.size());
  std::vector<StagingPiece> pieces;  // each of at most kPieceBytes, in the same order
  for (size_t k = 0; k < whole.size(); ++k) {
    const StagingPiece& in = whole[k];
    CountHostCopy(HostCopy::kStaging, in.bytes);
    for (size_t done = 0; done < in.bytes; done += kPieceBytes) {
      pieces.push_back({in.to + SlotOffset(done, in.repack), in.from + done, std::min(kPieceBytes, in.bytes - done),
                        in.repack, in.placed, in.wide_from, in.placed ? &gather_ns[k] : nullptr});
    }
  }
  // Large batches (tens of MB of ids) are copied by several threads: one thread's memcpy into
  // pinned memory would take longer than the batch's kernels. A large uncaptured run also sends
  // each chunk of pieces (contiguous in the staging buffer, as the inputs are laid out in order)
  // as soon as its last piece is packed, while the threads pack the next.
  const bool pipelined = !b.graph && !b.copy_kernels && !OpProfile::enabled() && b.in_total >= kPipelinedBytes;
  if (pipelined) {
    struct Chunk {
      size_t begin = 0, end = 0;  // bytes of the staging buffer
      std::atomic<int> left{0};   // pieces still to pack
    };
    std::vector<size_t> chunk_of(pieces.size());
    size_t count = 0;
    for (size_t p = 0, bytes = 0; p < pieces.size(); ++p) {
      if (p > 0 && bytes >= kChunkBytes) {
        ++count;
        bytes = 0;
      }
      chunk_of[p] = count;
      bytes += pieces[p].bytes;
    }
    std::vector<Chunk> chunks(count + 1);
    for (size_t p = 0; p < pieces.size(); ++p) {
      Chunk& c = chunks[chunk_of[p]];
      if (c.left++ == 0) c.begin = chunk_of[p] == 0 ? 0 : static_cast<size_t>(pieces[p].to - staged);
    }
    for (size_t c = 0; c + 1 < chunks.size(); ++c) chunks[c].end = chunks[c + 1].begin;
    chunks.back().end = b.in_total + sizeof(int);
    std::atomic<int> failed{cudaSuccess};
    const int device = resources_->device();
    auto* to = static_cast<uint8_t*>(io_.get());
    ParallelForEach(static_cast<int64_t>(pieces.size()), [&](int64_t i) {
      Pack(pieces[static_cast<size_t>(i)], staged_room_);
      Chunk& c = chunks[chunk_of[static_cast<size_t>(i)]];
      if (c.left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      cudaError_t e = cudaSetDevice(device);  // this may be a pool thread
      if (e == cudaSuccess) {
        e = cudaMemcpyAsync(to + c.begin, staged + c.begin, c.end - c.begin, cudaMemcpyHostToDevice, ctx_.stream);
      }
      if (e != cudaSuccess) failed.store(e);
    });
    if (failed.load() != cudaSuccess) {
      cudaStreamSynchronize(ctx_.stream);  // the chunks already sent
      return Check(static_cast<cudaError_t>(failed.load()), "cudaMemcpyAsync (an input chunk)");
    }
  } else {
    // The calling thread and whichever helpers are awake (common/helping_pool.h). At W1's 512
    // pairs on the H200's host, narrowing the ids alone took 58 µs on one thread.
    auto pack = [&](int64_t p) { Pack(pieces[static_cast<size_t>(p)], staged_room_); };
    if (b.in_total >= kHelpedStagingBytes) {
      HelpingPool::Shared().Run(static_cast<int64_t>(pieces.size()), pack);
    } else {
      for (size_t p = 0; p < pieces.size(); ++p) pack(static_cast<int64_t>(p));
    }
  }
  for (size_t k = 0; k < gather_ns.size(); ++k) {
    const uint64_t ns = gather_ns[k].load(std::memory_order_relaxed);
    if (ns > 0) whole[k].placed->RecordGatherTime(static_cast<double>(ns) * 1e-9);
  }
  if (OpProfile::phases()) OpProfile::RecordSince("(inputs packed into pinned memory)", staging_start);
  return pipelined;
}

}  // namespace rankd::cuda
