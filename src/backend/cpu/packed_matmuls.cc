#include "backend/cpu/packed_matmuls.h"

#include <bit>
#include <cstring>

#include "common/parallel.h"

#if RANKD_GEMM_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace rankd::cpu {

#if RANKD_GEMM_ONEDNN

namespace {

// fp32 to bf16, rounded to nearest even; a NaN stays a NaN.
uint16_t ToBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

void ToBf16(const float* in, uint16_t* out, int64_t n) {
  ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = ToBf16(in[i]);
  });
}

const dnnl::engine& Engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

}  // namespace

struct PackedMatmuls::Packed {
  dnnl::memory memory;  // fp32 or bf16, in the layout its desc says, allocated by oneDNN
};

struct PackedMatmuls::Primitive {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul matmul;
  std::shared_ptr<const Packed> weights;
  size_t scratchpad_bytes = 0;
};

bool HostHasBf16Matmuls() {
  static const bool has = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return has;
}

std::unique_ptr<PackedMatmuls> PackedMatmuls::Create(const Graph& graph, bool bf16) {
  std::unique_ptr<PackedMatmuls> products(new PackedMatmuls(bf16 && HostHasBf16Matmuls()));
  for (const Node& node : graph.nodes) {
    if ((node.op != "Gemm" && node.op != "MatMul") || node.inputs.size() < 2) continue;
    auto found = graph.constants.find(node.inputs[1]);
    if (found == graph.constants.end()) continue;
    const Tensor& b = found->second;
    if (b.dtype() != DType::kF32 || b.rank() != 2 || std::min(b.dim(0), b.dim(1)) < kMinSide ||
        b.size() < kMinWeights) {
      continue;
    }
    products->weights_.insert({b.data<float>(), node.op == "Gemm" && node.GetInt("transB", 0) != 0});
  }
  return products;
}

PackedMatmuls::~PackedMatmuls() = default;

StatusOr<std::shared_ptr<const PackedMatmuls::Primitive>> PackedMatmuls::PrimitiveFor(const PrimitiveKey& key) const {
  {
    MutexLock lock(mu_);
    auto it = primitives_.find(key);
    if (it != primitives_.end()) return it->second;
  }
  const auto& [b, trans_b, m, n, k, beta_bits] = key;
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  auto made = std::make_shared<Primitive>();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // each call its own: executors run it at once
  if (const float beta = std::bit_cast<float>(beta_bits); beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  const dnnl::memory::desc plain({k, n}, dt::f32, trans_b ? tag::ba : tag::ab);
  try {
    const dt operands = bf16_ ? dt::bf16 : dt::f32;
    const dnnl::memory::desc src({m, k}, operands, tag::ab), dst({m, n}, dt::f32, tag::ab);
    const dnnl::memory::desc weights({k, n}, operands, tag::any);  // the kernel's own blocks
    made->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, Engine());
    made->matmul = dnnl::matmul(made->pd);
  } catch (const dnnl::error& e) {
    return Internal(std::string("oneDNN could not make a product: ") + e.what());
  }
  made->scratchpad_bytes = made->pd.scratchpad_desc().get_size();
  MutexLock lock(mu_);
  // The weights in the layout this primitive reads: packed from the fp32 constant once per layout.
  std::vector<std::shared_ptr<const Packed>>& layouts = packed_[{b, trans_b}];
  for (const auto& layout : layouts) {
    if (layout->memory.get_desc() == made->pd.weights_desc()) made->weights = layout;
  }
  if (!made->weights) {
    try {
      auto packed = std::make_shared<Packed>();
      packed->memory = dnnl::memory(made->pd.weights_desc(), Engine());
      dnnl::memory from(plain, Engine(), const_cast<float*>(b));
      dnnl::stream stream(Engine());
      dnnl::reorder(from, packed->memory).execute(stream, from, packed->memory);
      stream.wait();
      layouts.push_back(packed);
      made->weights = std::move(packed);
    } catch (const dnnl::error& e) {
      return Internal(std::string("oneDNN could not pack a product's weights: ") + e.what());
    }
  }
  if (primitives_.size() >= kMaxPrimitives) primitives_.clear();
  return primitives_.emplace(key, std::move(made)).first->second;
}

Status PackedMatmuls::Run(const float* a, const float* b, bool trans_b, float* c, int64_t m, int64_t n, int64_t k,
                          float beta) const {
  if (!Takes(b, trans_b)) return Internal("a packed product's weights are not a constant of its model");
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Primitive> p,
                         PrimitiveFor({b, trans_b, m, n, k, std::bit_cast<uint32_t>(beta)}));
  thread_local std::vector<uint16_t> rows;
  thread_local std::vector<uint8_t> scratchpad;
  void* src_data = const_cast<float*>(a);
  if (bf16_) {
    rows.resize(static_cast<size_t>(m * k));
    ToBf16(a, rows.data(), m * k);
    src_data = rows.data();
  }
  scratchpad.resize(std::max<size_t>(p->scratchpad_bytes, 1));
  try {
    dnnl::stream stream(Engine());
    dnnl::memory src(p->pd.src_desc(), Engine(), src_data);
    dnnl::memory dst(p->pd.dst_desc(), Engine(), c);
    dnnl::memory pad(p->pd.scratchpad_desc(), Engine(), scratchpad.data());
    p->matmul.execute(
        stream,
        {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, p->weights->memory}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, pad}});
    stream.wait();
  } catch (const dnnl::error& e) {
    return Internal(std::string("a product failed in oneDNN: ") + e.what());
  }
  return Status::Ok();
}

#else  // OpenBLAS provides the sgemm: no packed products

struct PackedMatmuls::Packed {};
struct PackedMatmuls::Primitive {};
bool HostHasBf16Matmuls() { return false; }
std::unique_ptr<PackedMatmuls> PackedMatmuls::Create(const Graph&, bool) {
  return std::unique_ptr<PackedMatmuls>(new PackedMatmuls(false));
}
PackedMatmuls::~PackedMatmuls() = default;
StatusOr<std::shared_ptr<const PackedMatmuls::Primitive>> PackedMatmuls::PrimitiveFor(const PrimitiveKey&) const {
  return Unimplemented("packed products need oneDNN");
}
Status PackedMatmuls::Run(const float*, const float*, bool, float*, int64_t, int64_t, int64_t, float) const {
  return Unimplemented("packed products need oneDNN");
}

#endif

}  // namespace rankd::cpu
