// CudaExecutor: runs plans on one GPU with its own stream, workspace and cuBLASLt state.
//
// A run packs the host inputs into one pinned buffer and copies them to the device in one
// transfer, launches every step on the executor's stream, copies the outputs back and waits for
// the stream; a plan captured as a CUDA graph (Capture) replays all of that in one launch. In a
// capture, steps that share no bytes run side by side: each goes on one of a few lanes (streams
// forked from the executor's and joined before the output copy; runtime/step_lanes.h), so the
// graph's kernels depend on what they read, not on the order the plan lists them in. Bad
// data met on the device (an id out of range) is reported through one device word read back with
// the outputs, and fails only this run. Weights live in the model's
// CudaModelResources, shared by its executors; values folded at plan time are uploaded per plan.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_span.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/host_row_gather.h"
#include "backend/cuda/mapped_copy.h"
#include "backend/cuda/model_resources.h"
#include "common/completion_poller.h"
#include "runtime/cuda/bf16_copies.h"
#include "runtime/cuda/placed_ids.h"
#include "runtime/executor.h"
#include "runtime/nap_estimate.h"
#include "runtime/step_lanes.h"

namespace rankd::cuda {

// An instantiated CUDA graph, destroyed with its owner.
class CapturedGraph {
 public:
  explicit CapturedGraph(cudaGraphExec_t exec) : exec_(exec) {}
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph() { cudaGraphExecDestroy(exec_); }
  cudaGraphExec_t get() const { return exec_; }

 private:
  cudaGraphExec_t exec_;
};

// How many lanes a capture may use (1: every step on the executor's stream; 4 by default,
// `--cuda graph_lanes=N`); captures made after a change use the new value.
void SetGraphLanes(int lanes);
int GraphLanes();

// Whether runs with few input bytes (W1 up to about 2,000 pairs) move their inputs and outputs
// by kernels instead of copy nodes (mapped_copy.h; on by default, `--cuda copy_kernels=off`;
// bindings made after a change follow it).
void SetCopyKernels(bool on);
bool CopyKernels();
// The most input bytes such a run has (8 MiB by default, `--cuda copy_kernel_mb=N`; bindings made
// after a change follow it).
void SetCopyKernelBytes(size_t bytes);
size_t CopyKernelBytes();

// Whether such a run with few bytes of floats gathers its ids by a kernel of their own, beside
// the floats' first steps (Binding::late_gather; on by default, `--cuda late_gather=off`;
// bindings made after a change follow it).
void SetLateGather(bool on);
bool LateGather();

// Whether such a run of a merged batch gathers its ragged values from its requests' tensors
// (RunMergedInto; on by default, `--cuda merged_gather=off`: the host writes the merged ids first).
void SetMergedGather(bool on);
bool MergedGather();

// How a run's thread waits for the device once the run is launched (`--cuda device_wait=`;
// docs/cuda.md): spinning in cudaStreamSynchronize (the driver's default: under served load W1's
// executors spent 13% of the server's CPU there), asleep on an event made with
// cudaEventBlockingSync that the driver's interrupt wakes (no spinning, but each run ends later), or
// napping: asleep for most of the time the plan's runs have kept the host waiting, then spinning
// for the rest, or asleep until the GPU's poller (common/completion_poller.h), one thread for all
// the device's executors, finds the run's event done: it polls from the nap's end, a round every
// SetPollStep. Runs after a change follow it.
enum class DeviceWait : uint8_t { kSpin, kBlock, kNap, kPoller };
void SetDeviceWait(DeviceWait wait);
DeviceWait DeviceWaitMode();
// The time between a poller's rounds (`--cuda poll_us=`, default 10 µs); pollers already running
// keep theirs.
void SetPollStep(std::chrono::microseconds step);

// Ops whose kernels use an executor's cuBLASLt workspace and bf16 operand buffer (gemm.h): a
// capture's lanes order them among themselves.
inline bool UsesProductBuffers(const std::string& op) { return op == "Gemm" || op == "MatMul" || op == "Einsum"; }

// How an input's values change width on their way to its slot: INT64 ids written as INT32 where
// the slot is narrowed (compile/narrowable_ids.h).
enum class Repack : uint8_t { kCopy, kNarrow };

// Host bytes to pack into the staging buffer (cuda_staging.cc).
struct StagingPiece {
  uint8_t* to;
  const uint8_t* from;
  size_t bytes;  // read from `from`
  Repack repack = Repack::kCopy;
  const CudaRowCache* placed = nullptr;        // ids whose misses of this cache are staged (placed_ids.h)
  bool wide_from = false;                      // with placed: INT64 ids at `from`, else INT32
  std::atomic<uint64_t>* gather_ns = nullptr;  // with placed: where the nanoseconds placing them took are added
};

class CudaExecutor final : public Executor {
 public:
  static StatusOr<std::unique_ptr<Executor>> Create(std::shared_ptr<CudaModelResources> resources);
  ~CudaExecutor() override;

  Status RunInto(const Plan& plan, std::span<const Tensor> inputs, std::span<Tensor> outputs) override;
  // With copy kernels the input kernel reads each part of a deferred input where it lies (the
  // ragged values of requests merged into a batch, in the pinned pool): no host copy.
  Status RunMergedInto(const Plan& plan, std::span<const Tensor> inputs, DeferredMerge& deferred,
                       std::span<Tensor> outputs) override;
  StatusOr<int64_t> Capture(const Plan& plan) override;
  bool Captured(const Plan& plan) const override;
  StatusOr<Launches> CountLaunches(const Plan& plan) override;
  bool FillsRaggedTails() const override { return true; }

 private:
  explicit CudaExecutor(std::shared_ptr<CudaModelResources> resources) : resources_(std::move(resources)) {}

  struct Binding {
    std::vector<Tensor> views;       // device views of every value
    std::vector<Tensor> host_views;  // host views of constants (and aliases of them)
    std::vector<std::vector<const Tensor*>> step_inputs, step_host_inputs;
    std::vector<std::vector<Tensor*>> step_outputs;
    Bf16Copies bf16_copies;                         // offsets into the executor's bf16_copies_ (precision bf16)
    std::vector<std::pair<int, int>> input_rooted;  // (value id, graph input index)
    // (value id, offset after the error word): the outputs' bytes (and their aliases'), moved
    // from the workspace to follow the error word, so that one copy brings all of them back.
    std::vector<std::pair<int, size_t>> output_rooted;
    std::vector<bool> narrowed;       // per graph input: INT64 ids sent as INT32 (compile/narrowable_ids.h)
    std::vector<bool> ragged_values;  // per graph input: a ragged pair's values (NAME.values, compile/passes.h)
    // Per graph input: the table cache its ids are placed for (placed_ids.h), or null; those
    // inputs, where they lie in io_ (sorted: DeviceContext::placed_ids), and the staged rows' room
    // in units their runs may use.
    std::vector<const CudaRowCache*> placed;
    std::vector<size_t> placed_inputs;
    std::vector<const void*> placed_ids;
    size_t staged_units = 0;
    // The inputs whose ids, all of bags of a table in host memory without a cache, are gathered on
    // the device (host_row_gather.h): as the gather takes them (their ids' address set by Stage),
    // their indices, where they lie in io_ (sorted: DeviceContext::gathered_ids), the gather's
    // scratch and the gathered rows' room in units.
    std::vector<GatheredInput> gathered;
    std::vector<size_t> gathered_inputs;
    std::vector<const void*> gathered_ids;
    size_t gather_scratch_bytes = 0, gathered_units = 0;
    std::unique_ptr<DeviceBuffer> folded;  // device copies of plan-folded values
    NapEstimate nap;                       // how long its runs keep the host waiting after their launch (WaitForDevice)
    // Where each input and output lies in the staging buffers (fixed by the plan's shapes). On
    // the device, io_ holds the inputs, then at in_total the error word and the outputs laid out
    // as in staged_outputs_: the input copy clears the error word, one copy brings back both
    // (unless outputs_pinned, below).
    std::vector<size_t> in_offsets, out_offsets;
    std::vector<bool> out_separate;  // per output: not after the error word (an input or a constant), copied alone
    size_t out_copied = 0;           // bytes after in_total the output copy brings back (a multiple of 16)
    // A small run's inputs come over by a kernel that reads each where it lies, a request's
    // tensor in the pinned pool (pinned_pool.h) or its slot of the staging buffer where it had to
    // be packed (mapped_copy.h), or each part of a merged batch's input (RunMergedInto). The
    // sources' table (a GatherTable, then at most max_sources sources) follows the error word's
    // room in the staging buffer, at sources_at.
    bool copy_kernels = false;
    // With copy kernels, where no step reads an output back: the error word and the outputs lie
    // in the pinned output buffer itself, the host clears the word before each run, and the steps
    // write both there (no output copy). Otherwise they lie in io_, the input kernel clears the
    // word, and an output kernel copies both into the pinned buffer.
    bool outputs_pinned = false;
    size_t sources_at = 0;
    int max_sources = 0;
    std::vector<size_t> slot_order;  // the inputs in the order of their slots, the sources' order
    // With copy kernels, a plan whose few bytes of float inputs feed steps that read no ids (W1's
    // dense features and bottom MLP) gathers them first, by a kernel of their own, and its ids by
    // a second, the first entry of the lane schedule: the dense chain runs while the ids come
    // over. The floats' slots come first in io_; the ids' begin at late_from.
    bool late_gather = false;
    size_t late_from = 0;
    std::vector<size_t> in_bytes;   // per input: the bytes of its slot (the plan's shape)
    std::vector<size_t> tail_from;  // per input: its slot holds -1 from here on (FillTails)
    size_t in_total = 0, out_total = 0;
    std::unique_ptr<CapturedGraph> graph;  // the plan captured on this executor's buffers, if it is
    bool ran = false;                      // enqueued once outside a capture
  };
  // The plan's binding on this executor, made on first use: device views of its values in the
  // workspace, the weights and io_, and where its inputs and outputs lie in the staging buffers.
  StatusOr<Binding*> Bind(const Plan& plan);
  // Device copies of the plan's folded values (not graph constants), by their host tensor.
  StatusOr<std::unordered_map<const Tensor*, void*>> UploadFolded(const Plan& plan, Binding& b);
  // Every value's device view (and a constant's host view), and each step's pointers to them.
  void BindViews(const Plan& plan, const std::unordered_map<const Tensor*, void*>& folded, Binding& b);
  // The inputs' and outputs' places in io_ and the staging buffers, and how they move.
  void LayOutIo(const Plan& plan, Binding& b);
  // Which inputs' ids the host places (placed_ids.h) and which the device gathers
  // (host_row_gather.h), and the rooms they want.
  void PlaceInputs(const Plan& plan, Binding& b);
  // Makes the staging buffers and io_ large enough for `b`, points its input views into io_ and its
  // output views and the error word into io_ or the pinned output buffer (Binding::outputs_pinned);
  // a buffer that moves drops every capture (they hold its old address).
  Status Stage(Binding& b);
  // Packs the host inputs into the pinned staging buffer, on several threads (cuda_staging.cc). When
  // the run is uncaptured and large, also queues the input copy in chunks as they are packed, and
  // returns true (the copy is then already on the stream).
  StatusOr<bool> StageInputs(Binding& b, std::span<const Tensor> inputs);
  // Checks each input against its slot, and fills with -1 the slots after an input shorter than
  // the plan's (a ragged input's ids, FillsRaggedTails), only as far as the last tail filled
  // when `b` staged last (not for copy kernels: the input kernel fills the tails).
  Status FillTails(Binding& b, std::span<const Tensor> inputs);
  // For copy kernels: lists where the input kernel takes each input from (each part of one that
  // deferred_ holds, where the table has room), packing into the staging buffer those it cannot
  // read where they lie; returns the pieces to pack.
  std::vector<StagingPiece> ListSources(Binding& b, std::span<const Tensor> inputs);
  // How input `i` of `b`, as `in` holds it, is written to its slot, and the bytes it fills there.
  static Repack RepackOf(const Binding& b, size_t i, const Tensor& in);
  static size_t SlotBytes(const Tensor& in, Repack repack);
  // For copy kernels: every input taken from its staging slot, as the slot holds it.
  void ListStagedSources(const Binding& b);
  // The sources' table's header, for its first `count` sources as listed.
  void WriteTableCounts(const Binding& b, uint32_t count);
  // For copy kernels: whether the ids are worth a gather of their own (Binding::late_gather), and
  // if so the inputs' slots laid out again, floats first.
  void SplitLateInputs(const Plan& plan, Binding& b);
  // An input kernel of a run with copy kernels: of every input, or where the ids gather late
  // (Binding::late_gather) of the floats or of the ids; all but the ids' also clear the error word.
  Status GatherInputs(const Binding& b, GatherPart part);
  // In a capture: notes the node just captured on the stream, a copy by kernel (CountLaunches
  // counts it as the copy it replaces).
  void NoteCopyNode();
  // Per plan value: the graph input it is (or aliases), or -1.
  static std::vector<int> GraphInputOf(const Binding& b, size_t values);
  // Enqueues the input copy (unless `inputs_sent`: Run sent it in chunks), every step and the
  // output copy on the stream (or into a capture).
  Status Enqueue(const Plan& plan, Binding& b, bool inputs_sent = false, const LaneSchedule* lanes = nullptr);
  // Enqueues `plan` into a capture on the stream and hands back the graph (the caller destroys it).
  StatusOr<cudaGraph_t> Record(const Plan& plan, Binding& b);
  // Launches every step on the stream, or, given a schedule (in a capture), each on its lane.
  Status Launch(const Plan& plan, Binding& b, const LaneSchedule* lanes = nullptr);
  Status LaunchStep(const Plan& plan, Binding& b, size_t s);
  // Enqueues the gather of the run's ids of tables in host memory (Binding::gathered), if any, on
  // the current stream: after the ids are on the device, before any step reads them.
  Status GatherHostRows(const Binding& b);
  // The schedule of `plan`'s steps on this executor's lanes: what they touch in the workspace
  // and in the bf16 copies, products ordered among themselves (they share cuBLASLt's workspace
  // and the bf16 operand buffer). Where the ids gather late, the schedule's first entry is the
  // ids' gather, and step s of the plan is the schedule's s + 1.
  LaneSchedule ScheduleOnLanes(const Plan& plan, const Binding& b) const;
  // Waits for the run launched on the stream, as DeviceWaitMode says.
  Status WaitForDevice(Binding& b);
  // DeviceWait::kPoller: asleep until the device's poller finds the run done.
  Status WaitForPoller(Binding& b);
  void DropCaptures();
  void ClearBindings();  // and forgets which binding's tails the staging buffer holds

  std::shared_ptr<CudaModelResources> resources_;
  DeviceContext ctx_;
  std::vector<cudaStream_t> side_streams_;   // lanes 1, 2, ... of a capture
  std::vector<cudaEvent_t> events_;          // a capture's fork, joins and waits
  cudaEvent_t done_ = nullptr;               // a run's end, waited on asleep (DeviceWait::kBlock)
  cudaEvent_t polled_ = nullptr;             // a run's end, queried by the GPU's poller (DeviceWait::kPoller)
  CompletionPoller* poller_ = nullptr;       // that poller, once used (it lives as long as the process)
  std::vector<cudaGraphNode_t> copy_nodes_;  // the last capture's copies by kernel (NoteCopyNode)
  bool recording_ = false;                   // Record's Enqueue is running
  GemmCache gemm_;
  DeviceBuffer workspace_, lt_workspace_, io_;  // io_: inputs, error word, outputs (Binding)
  DeviceBuffer bf16_operands_;  // bf16 product operands (precision bf16), as large as a bound plan needs
  DeviceBuffer bf16_copies_;    // bf16 copies producers write for products (bf16_copies.h)
  PinnedBuffer staged_inputs_, staged_outputs_;
  PinnedBuffer staged_rows_;                     // the rows a run's placed ids stage (placed_ids.h)
  DeviceBuffer gather_scratch_, gathered_rows_;  // a run's device gather: its scratch and rows (host_row_gather.h)
  StagedRoom staged_room_;                       // staged_rows_ as the run's placing hands it out
  std::unordered_map<uint64_t, Binding> bindings_;
  // The model's table caches as this executor's kernels find them (DeviceContext::row_caches): the
  // model's, and the GPU caches of tables on disk by where the bound plan's input of their staged
  // rows lies in io_ (Stage sets them; staged_slot_inputs_ are those addresses).
  RowCaches row_caches_;
  std::vector<const void*> staged_slot_inputs_;
  DeferredMerge* deferred_ = nullptr;     // during RunMergedInto: the batch's inputs not yet written
  const Binding* tails_owner_ = nullptr;  // the binding whose tail_from the staging buffer holds
  DeviceSpan span_;                       // a run's device time, when a profile mode is set
};

}  // namespace rankd::cuda
