// Backend: a set of kernels, one per op name, that run planned steps.
//
// The CPU backend is the reference; the CUDA backend (later) implements the same op names and is
// tested against it. A kernel receives inputs and outputs whose shapes the op's schema already
// checked (model/ops/op_schema.h), writes only its outputs and scratch, never allocates, and
// returns a Status only for errors that depend on data (an id out of range).
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/row_slots.h"
#include "backend/table_cache.h"
#include "backend/table_placement.h"
#include "model/graph.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

struct DeviceContext;  // a device backend's per-executor state (stream, library handles)
class ModelResources;

// What a kernel derives from its node once, when a plan is built, so that runs do no parsing or
// lookups (a fused loop's parsed program, a generated kernel's handle). A kernel that has one
// downcasts KernelArgs::state to its own type; the plan step owns it.
struct KernelState {
  virtual ~KernelState() = default;
};

struct KernelArgs {
  const Node& node;
  std::span<const Tensor* const> in;  // nullptr for an omitted optional input
  std::span<Tensor* const> out;
  void* scratch = nullptr;  // schema-requested scratch, 64-byte aligned, in the backend's memory
  // Host copies of the inputs that are plan constants (shape-like operands: Slice starts, Clip
  // bounds, Reduce axes); nullptr for the others. On the CPU this is `in` itself.
  std::span<const Tensor* const> host_in = {};
  DeviceContext* device = nullptr;     // set by device backends' executors
  int step = -1;                       // the step's index in its plan (device error reports)
  const KernelState* state = nullptr;  // what the kernel's prepare made of this node, if it has one
  void* counters = nullptr;            // the model's ModelResources::kernel_counters(); null outside a model's run
  const ModelResources* resources = nullptr;  // the model's, on the host (the CPU's packed products); may be null

  const Tensor& In(int i) const { return *in[static_cast<size_t>(i)]; }
  bool HasIn(int i) const { return i < static_cast<int>(in.size()) && in[static_cast<size_t>(i)]; }
  Tensor& Out(int i) const { return *out[static_cast<size_t>(i)]; }
  // The host copy of constant input i, or nullptr when it is computed at run time.
  const Tensor* HostIn(int i) const {
    return i < static_cast<int>(host_in.size()) ? host_in[static_cast<size_t>(i)] : nullptr;
  }
};

using KernelFn = Status (*)(const KernelArgs&);
using PrepareFn = StatusOr<std::shared_ptr<const KernelState>> (*)(const Node&);

// A backend's implementation of one op: what runs, and optionally what is prepared per step.
struct Kernel {
  Kernel() = default;
  Kernel(KernelFn run_fn, PrepareFn prepare_fn = nullptr)
      : run(run_fn), prepare(prepare_fn) {}  // NOLINT: tables assign KernelFns
  KernelFn run = nullptr;
  PrepareFn prepare = nullptr;
};
using KernelTable = std::map<std::string, Kernel>;

// How a model's matrix products may round: fp32 (exact, the default), tf32 (TF32 tensor cores,
// about 1e-3 relative) or bf16 (bfloat16 tensor cores, about 1e-2). bf16-activations rounds the
// products as bf16 does and also keeps in bf16 alone the activations that only products and
// same-shape multiply-adds read (DCNv2's cross network: its input and residuals), as TensorRT
// keeps a bf16 engine's activations; bf16 keeps them in fp32, as PyTorch's autocast does.
// The CPU takes bf16 products by its large weight matrices where it multiplies bf16 natively
// (AVX512-BF16, AMX: cpu/packed_matmuls.h), keeping every activation in fp32; elsewhere it
// computes in fp32 whatever is asked.
enum class Precision { kFp32, kTf32, kBf16, kBf16Activations };
StatusOr<Precision> ParsePrecision(const std::string& name);
const char* PrecisionName(Precision p);
// Whether products take bf16 operands (bf16 and bf16-activations).
inline bool Bf16Products(Precision p) { return p == Precision::kBf16 || p == Precision::kBf16Activations; }

// How a backend prepares a model: how its products round and where its tables live.
struct PrepareOptions {
  Precision precision = Precision::kFp32;
  TablePlacement tables;  // empty: every table on the device
  // Models of the same group (a model's versions: its name) that read the same table in the same
  // host storage share its device cache where the backend keeps one (backend/cuda/shared_row_caches.h);
  // empty: caches of their own.
  std::string cache_group;
  // Tables on disk with a GPU cache (embedding/gpu_row_tier.h): by the graph input that holds a
  // run's staged rows of the table, the device address of the cache's slots. A lookup reading that
  // input as its table reads an id below -1 from the slots (as a staged row: RowCacheView::staged,
  // backend/cuda/device.h) and any other from the input.
  std::map<size_t, const void*> staged_row_slots = {};
};

// What a backend keeps per loaded model and shares between that model's executors (device copies
// of the weights, say). Created once per model; outlives its executors.
class ModelResources {
 public:
  virtual ~ModelResources() = default;
  // The device caches of the tables placed as cached (TablePlacement::cached), by the table's
  // value id; empty where the backend keeps none. They live as long as these resources.
  virtual std::map<int, TableCache*> table_caches() const { return {}; }
  // The counters kernels add to (KernelArgs::counters), in the backend's memory; null when the
  // graph has none (KernelCounters).
  virtual void* kernel_counters() const { return nullptr; }
  // Their values now, one per counter.
  virtual std::vector<int64_t> ReadCounters() const { return {}; }
};

// The counters a graph's kernels keep: one per keyed table, by the `counters` attribute of the
// KeyedRows parts that read it (model/ops/keyed_rows.h: the keys its index did not hold). Counter c is an int64_t at
// kernel_counters() + 8c: on the host a std::atomic<int64_t>, on a device an unsigned long long added to atomically.
int KernelCounters(const Graph& graph);

enum class DeviceKind { kHost, kCuda };

// Device memory another process shared (Backend::OpenSharedMemory), read and written by copies
// from and to host memory; closed when destroyed. Thread-safe.
class SharedDeviceMemory {
 public:
  virtual ~SharedDeviceMemory() = default;
  virtual uint64_t byte_size() const = 0;
  // Copies `bytes` bytes at `offset` (within byte_size(), checked by the caller) to `dst` / from `src`.
  virtual Status Read(uint64_t offset, void* dst, size_t bytes) const = 0;
  virtual Status Write(uint64_t offset, const void* src, size_t bytes) const = 0;
  // A read of ReadMany's: `bytes` bytes at `offset` to `dst`.
  struct Piece {
    uint64_t offset = 0;
    void* dst = nullptr;
    size_t bytes = 0;
  };
  // Copies every piece, each started before any is waited for (a request's inputs: one wait in
  // all, not one an input).
  virtual Status ReadMany(std::span<const Piece> pieces) const {
    for (const Piece& p : pieces) RANKD_RETURN_IF_ERROR(Read(p.offset, p.dst, p.bytes));
    return Status::Ok();
  }
};

// Host memory page-locked for the GPUs (Backend::PinHostMemory): unlocked when destroyed, which
// must happen while the memory is still mapped.
class PinnedHostMemory {
 public:
  virtual ~PinnedHostMemory() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // The kernel for an op, or nullptr when this backend does not run it.
  virtual const Kernel* FindKernel(const std::string& op) const = 0;
  // OK when every node has a schema and a kernel here and its attributes pass the schema's check;
  // otherwise an error naming the op, the node and what is missing.
  Status CheckGraph(const Graph& graph) const;
  // Per-model state for a graph whose constants are final (after the load-time passes).
  virtual StatusOr<std::shared_ptr<ModelResources>> PrepareModel(const Graph& graph,
                                                                 const PrepareOptions& options) const = 0;
  StatusOr<std::shared_ptr<ModelResources>> PrepareModel(const Graph& graph, Precision precision) const {
    return PrepareModel(graph, PrepareOptions{precision, {}, {}});
  }
  // Where the kernels run and read their tensors: host memory, or a CUDA device's. The runtime
  // picks the executor for a backend by this (runtime/backends.h).
  virtual DeviceKind device_kind() const = 0;
  // The index of the device it runs on, among those of its kind (a GPU's CUDA index; 0 for the
  // host). A backend instance runs on one device.
  virtual int device() const { return 0; }
  // Whether the load-time passes may give products a multiply-add epilogue (FuseProductMulAdds),
  // for a model run at `precision`.
  virtual bool TakesProductMulAdds(Precision precision) const {
    (void)precision;
    return true;
  }
  // Products reading one input by different constant weights are merged into one, its columns
  // sliced apart (MergeSiblingProducts), where the merged weights hold at least this many values;
  // 0: never (a GPU, where each slice would be a launch of its own).
  virtual int64_t SiblingProductsMinWeights() const { return 0; }
  // Plans whose values all fit in this many bytes of workspace, each in its own room, get it so
  // (Plan::Build): no step then waits for another only because it reuses the other's room, and
  // steps that share no data may run at the same time (runtime/step_lanes.h). 0: room is always
  // reused once a value's last reader ran.
  virtual int64_t SeparateRoomBytes() const { return 0; }
  // Executors a model keeps unless its options say otherwise: 0 for as many as requests run at
  // once (the host's are only workspaces), a few on a device (each holds a stream and workspace).
  virtual int DefaultExecutors() const { return 0; }
  // OK while the backend can run work; Unavailable once its device met an error that leaves it
  // unusable until the process restarts (a sticky CUDA error).
  virtual Status Health() const { return Status::Ok(); }
  // Device memory another process exported with cudaIpcGetMemHandle (`handle`: the handle's bytes),
  // `byte_size` bytes of it, opened on this backend's device (Triton's CUDA shared memory).
  // Unimplemented where the backend runs on the host.
  virtual StatusOr<std::unique_ptr<SharedDeviceMemory>> OpenSharedMemory(const std::string& handle,
                                                                         uint64_t byte_size) const {
    return Unimplemented(std::string("the ") + name() + " backend has no device memory to share");
  }
  // Page-locks [data, data + bytes) of this process's memory and maps it into every GPU's address
  // space at the same address, so that kernels read it in place as they read memory the pinned
  // pool gave out (a tensor over it may be located MemoryKind::kPinned). Errors: Unimplemented on
  // the host; a range the driver refuses, or one it would map at another address.
  virtual StatusOr<std::unique_ptr<PinnedHostMemory>> PinHostMemory(void* data, size_t bytes) const {
    (void)data;
    (void)bytes;
    return Unimplemented(std::string("the ") + name() + " backend has no device to pin host memory for");
  }
  // `slots` rows of `row_bytes` in this backend's device memory, for a GPU cache of a table on disk
  // (embedding/gpu_row_tier.h). Unimplemented where the backend runs on the host.
  virtual StatusOr<std::unique_ptr<RowSlots>> CreateRowSlots(int64_t slots, int64_t row_bytes) const {
    (void)slots;
    (void)row_bytes;
    return Unimplemented(std::string("the ") + name() + " backend has no device memory for rows");
  }
  // OK when a model of `graph` prepared with `options` and `executors` executors fits beside what
  // already runs here; ResourceExhausted, with the estimate, when it does not. Called before
  // PrepareModel, so that a load that cannot fit never takes memory the serving models need.
  virtual Status CheckRoom(const Graph& graph, const PrepareOptions& options, int executors) const {
    (void)graph;
    (void)options;
    (void)executors;
    return Status::Ok();
  }
};

// The process-wide CPU backend. Thread-safe (stateless).
const Backend& CpuBackend();

}  // namespace rankd
