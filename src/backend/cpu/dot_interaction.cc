// CPU kernel of DotInteraction (model/ops/dot_interaction.h): per row, the dense part copied
// and each pair's dot product summed over d in order, in FP32.
#include "model/ops/dot_interaction.h"

#include <algorithm>

#include "backend/cpu/kernels.h"
#include "common/parallel.h"

namespace rankd::cpu {
namespace {

using namespace dot_interaction;

Status DotInteraction(const KernelArgs& k) {
  const Tensor& features = k.In(kFeatures);
  const int64_t* pairs = k.In(kPairs).data<int64_t>();
  const float* dense = k.HasIn(kDense) ? k.In(kDense).data<float>() : nullptr;
  Tensor& out = k.Out(0);
  const int64_t rows = features.dim(0), fields = features.dim(1), dim = features.dim(2);
  const int64_t count = k.In(kPairs).dim(0), width = dense ? k.In(kDense).dim(1) : 0, out_width = width + count;
  const float* pf = features.data<float>();
  float* po = out.data<float>();
  ParallelFor(rows, count * dim + width + 1, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      float* o = po + n * out_width;
      if (dense) std::copy(dense + n * width, dense + (n + 1) * width, o);
      const float* f = pf + n * fields * dim;
      for (int64_t p = 0; p < count; ++p) {
        const float *a = f + pairs[2 * p] * dim, *b = f + pairs[2 * p + 1] * dim;
        float dot = 0.0f;
        for (int64_t d = 0; d < dim; ++d) dot += a[d] * b[d];
        o[width + p] = dot;
      }
    }
  });
  return Status::Ok();
}

}  // namespace

void AppendDotInteractionKernels(KernelTable& out) { out["DotInteraction"] = DotInteraction; }

}  // namespace rankd::cpu
