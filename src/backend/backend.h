// Backend: a set of kernels, one per op name, that run planned steps.
//
// The CPU backend is the reference; the CUDA backend (later) implements the same op names and is
// tested against it. A kernel receives inputs and outputs whose shapes the op's schema already
// checked (compile/ops/op_schema.h), writes only its outputs and scratch, never allocates, and
// returns a Status only for errors that depend on data (an id out of range).
#pragma once

#include <span>
#include <string>

#include "rankd/status.h"
#include "rankd/tensor.h"
#include "model/graph.h"

namespace rankd {

struct KernelArgs {
  const Node& node;
  std::span<const Tensor* const> in;  // nullptr for an omitted optional input
  std::span<Tensor* const> out;
  void* scratch = nullptr;  // schema-requested scratch, 64-byte aligned
  const Tensor& In(int i) const { return *in[static_cast<size_t>(i)]; }
  bool HasIn(int i) const { return i < static_cast<int>(in.size()) && in[static_cast<size_t>(i)]; }
  Tensor& Out(int i) const { return *out[static_cast<size_t>(i)]; }
};

using KernelFn = Status (*)(const KernelArgs&);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // The kernel for an op, or nullptr when this backend does not run it.
  virtual KernelFn FindKernel(const std::string& op) const = 0;
  // OK when every node has a schema and a kernel here and its attributes pass the schema's check;
  // otherwise an error naming the op, the node and what is missing.
  Status CheckGraph(const Graph& graph) const;
};

// The process-wide CPU backend. Thread-safe (stateless).
const Backend& CpuBackend();

}  // namespace rankd
