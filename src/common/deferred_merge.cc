#include "common/deferred_merge.h"

#include <cstdint>
#include <cstring>

#include "common/host_copies.h"

namespace rankd {

void DeferredMerge::Add(Tensor merged, std::vector<Tensor> parts) {
  inputs_.push_back({std::move(merged), std::move(parts), false});
}

DeferredMerge::Input* DeferredMerge::Pending(const void* data, size_t bytes) {
  for (Input& in : inputs_) {
    if (!in.done && in.merged.raw() == data && in.merged.bytes() == bytes) return &in;
  }
  return nullptr;
}

const std::vector<Tensor>* DeferredMerge::Find(const void* data, size_t bytes) {
  Input* in = Pending(data, bytes);
  return in ? &in->parts : nullptr;
}

const std::vector<Tensor>* DeferredMerge::Take(const void* data, size_t bytes) {
  Input* in = Pending(data, bytes);
  if (!in) return nullptr;
  in->done = true;
  return &in->parts;
}

void DeferredMerge::WriteRest() {
  for (Input& in : inputs_) {
    if (in.done) continue;
    auto* to = static_cast<uint8_t*>(in.merged.raw());
    for (const Tensor& part : in.parts) {
      if (part.bytes() > 0) std::memcpy(to, part.raw(), part.bytes());
      to += part.bytes();
      CountHostCopy(HostCopy::kMerge, part.bytes());
    }
    in.done = true;
  }
}

bool GatherablePart(const Tensor& t) {
  const size_t item = DTypeSize(t.dtype());
  return t.location().kind == MemoryKind::kPinned && reinterpret_cast<uintptr_t>(t.raw()) % 16 == 0 &&
         (item == 4 || item == 8);
}

}  // namespace rankd
