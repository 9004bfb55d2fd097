// CUDA kernels of the element-wise ops: one grid-stride kernel per op family, broadcasting through
// an index map (cpu/elementwise.cc is the reference).
#include <cuda_bf16.h>

#include <cmath>
#include <limits>
#include <map>
#include <type_traits>

#include "backend/cuda/device.h"
#include "backend/cuda/dtypes.cuh"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/kernels.h"

namespace rankd::cuda {
namespace {

template <typename T, typename U, typename Op>
__global__ void BinaryKernel(IndexMap<2> m, int64_t n, const T* a, const T* b, U* out, Op op) {
  RANKD_GRID_LOOP(i, n) {
    int64_t off[2];
    m.Offsets(i, off);
    out[i] = op(a[off[0]], b[off[1]]);
  }
}

template <typename T, typename U, typename Op>
__global__ void UnaryKernel(int64_t n, const T* a, U* out, Op op) {
  RANKD_GRID_LOOP(i, n) out[i] = op(a[i]);
}

template <typename T, typename U, typename Op>
Status Binary(const KernelArgs& k, const Tensor& a, const Tensor& b, Tensor& out, Op op) {
  if (out.size() == 0) return Status::Ok();
  const Shape* shapes[2] = {&a.shape(), &b.shape()};
  RANKD_ASSIGN_OR_RETURN(IndexMap<2> m, BroadcastMap<2>(out.shape(), shapes));
  BinaryKernel<<<Blocks(out.size()), kThreads, 0, k.device->stream>>>(m, out.size(), a.data<T>(), b.data<T>(),
                                                                      out.data<U>(), op);
  return Launched(k);
}

template <typename T, typename U, typename Op>
Status Unary(const KernelArgs& k, Op op) {
  int64_t n = k.Out(0).size();
  if (n == 0) return Status::Ok();
  UnaryKernel<<<Blocks(n), kThreads, 0, k.device->stream>>>(n, k.In(0).data<T>(), k.Out(0).data<U>(), op);
  return Launched(k);
}

// Binary operations.
struct AddOp {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    return static_cast<T>(x + y);
  }
};
struct SubOp {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    return static_cast<T>(x - y);
  }
};
struct MulOp {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    return static_cast<T>(x * y);
  }
};
struct DivOp {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>)
      return y == 0 ? T{0} : static_cast<T>(x / y);
    else
      return x / y;
  }
};
// ONNX's Mod, as the CPU's (cpu/elementwise.cc): a remainder with the divisor's sign, or with the
// dividend's (C's fmod) when `c_fmod`; an integer remainder by 0 or -1 is 0.
struct ModOp {
  bool c_fmod = false;
  template <typename T>
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      if (y == 0 || y == T(-1)) return T{0};
      T r = static_cast<T>(x % y);
      if (!c_fmod && r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
      return r;
    } else {
      return fmod(x, y);
    }
  }
};
template <bool kMax>
struct MaxMinOp {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (isnan(x) || isnan(y)) return std::numeric_limits<T>::quiet_NaN();
    }
    return kMax ? (x > y ? x : y) : (x < y ? x : y);
  }
};
struct PowOp {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    return y == T(2) ? x * x : static_cast<T>(pow(x, y));
  }
};
enum class Cmp { kEq, kGt, kGe, kLt, kLe };
template <Cmp C>
struct CompareOp {
  template <typename T>
  __device__ uint8_t operator()(T x, T y) const {
    switch (C) {
      case Cmp::kEq:
        return x == y;
      case Cmp::kGt:
        return x > y;
      case Cmp::kGe:
        return x >= y;
      case Cmp::kLt:
        return x < y;
      default:
        return x <= y;
    }
  }
};
enum class Logic { kAnd, kOr, kXor };
template <Logic L>
struct LogicOp {
  __device__ uint8_t operator()(uint8_t x, uint8_t y) const {
    return L == Logic::kAnd ? (x && y) : L == Logic::kOr ? (x || y) : ((x != 0) != (y != 0));
  }
};

// Unary operations.
enum class Fn { kSigmoid, kTanh, kErf, kSqrt, kExp, kLog, kReciprocal, kFloor, kCeil, kNeg, kAbs, kRelu };
template <Fn F>
struct UnaryOp {
  template <typename T>
  __device__ T operator()(T x) const {
    if constexpr (F == Fn::kNeg)
      return static_cast<T>(-x);
    else if constexpr (F == Fn::kAbs)
      return x < T(0) ? static_cast<T>(-x) : x;
    else if constexpr (F == Fn::kRelu)
      return x > T(0) ? x : T(0);
    else if constexpr (F == Fn::kSigmoid)
      return T(1) / (T(1) + exp(-x));
    else if constexpr (F == Fn::kTanh)
      return tanh(x);
    else if constexpr (F == Fn::kErf)
      return erf(x);
    else if constexpr (F == Fn::kSqrt)
      return sqrt(x);
    else if constexpr (F == Fn::kExp)
      return exp(x);
    else if constexpr (F == Fn::kLog)
      return log(x);
    else if constexpr (F == Fn::kReciprocal)
      return T(1) / x;
    else if constexpr (F == Fn::kFloor)
      return floor(x);
    else
      return ceil(x);
  }
};
struct NotOp {
  __device__ uint8_t operator()(uint8_t x) const { return !x; }
};
template <typename T>
struct ClipOp {
  const T* lo;
  const T* hi;
  __device__ T operator()(T x) const {
    T l = lo ? *lo : std::numeric_limits<T>::lowest(), h = hi ? *hi : std::numeric_limits<T>::max();
    return x < l ? l : (x > h ? h : x);
  }
};
template <typename To>
struct CastOp {
  template <typename From>
  __device__ To operator()(From x) const {
    return Convert<To>(x);
  }
};

Status Arith(const KernelArgs& k) {
  const std::string& op = k.node.op;
  return DispatchNumeric(k.In(0).dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const Tensor &a = k.In(0), &b = k.In(1);
    Tensor& out = k.Out(0);
    if (op == "Add") return Binary<T, T>(k, a, b, out, AddOp{});
    if (op == "Sub") return Binary<T, T>(k, a, b, out, SubOp{});
    if (op == "Mul") return Binary<T, T>(k, a, b, out, MulOp{});
    return Binary<T, T>(k, a, b, out, DivOp{});
  });
}

Status Mod(const KernelArgs& k) {
  const ModOp op{k.node.GetInt("fmod", 0) == 1};
  return DispatchNumeric(k.In(0).dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    return Binary<T, T>(k, k.In(0), k.In(1), k.Out(0), op);
  });
}

Status MaxMin(const KernelArgs& k) {
  bool is_max = k.node.op == "Max";
  Tensor& out = k.Out(0);
  if (k.in.size() == 1) {
    return Check(cudaMemcpyAsync(out.raw(), k.In(0).raw(), out.bytes(), cudaMemcpyDeviceToDevice, k.device->stream),
                 "cudaMemcpyAsync");
  }
  return DispatchNumeric(out.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    for (size_t i = 1; i < k.in.size(); ++i) {
      const Tensor& a = i == 1 ? k.In(0) : out;
      const Tensor& b = k.In(static_cast<int>(i));
      Status s = is_max ? Binary<T, T>(k, a, b, out, MaxMinOp<true>{}) : Binary<T, T>(k, a, b, out, MaxMinOp<false>{});
      RANKD_RETURN_IF_ERROR(s);
    }
    return Status::Ok();
  });
}

Status Pow(const KernelArgs& k) {
  const Tensor &a = k.In(0), &b = k.In(1);
  if (b.dtype() != a.dtype()) {
    return Unimplemented(k.node.Describe() + ": the cuda Pow takes an exponent of the base's dtype");
  }
  return DispatchFloat(a.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    return Binary<T, T>(k, a, b, k.Out(0), PowOp{});
  });
}

Status Compare(const KernelArgs& k) {
  const std::string& op = k.node.op;
  const Tensor &a = k.In(0), &b = k.In(1);
  Tensor& out = k.Out(0);
  auto run = [&](auto tag) -> Status {
    using T = decltype(tag);
    if (op == "Equal") return Binary<T, uint8_t>(k, a, b, out, CompareOp<Cmp::kEq>{});
    if (op == "Greater") return Binary<T, uint8_t>(k, a, b, out, CompareOp<Cmp::kGt>{});
    if (op == "GreaterOrEqual") return Binary<T, uint8_t>(k, a, b, out, CompareOp<Cmp::kGe>{});
    if (op == "Less") return Binary<T, uint8_t>(k, a, b, out, CompareOp<Cmp::kLt>{});
    return Binary<T, uint8_t>(k, a, b, out, CompareOp<Cmp::kLe>{});
  };
  if (a.dtype() == DType::kBool || a.dtype() == DType::kU8) return run(uint8_t{});
  return DispatchNumeric(a.dtype(), run);
}

Status LogicKernel(const KernelArgs& k) {
  const std::string& op = k.node.op;
  const Tensor &a = k.In(0), &b = k.In(1);
  if (op == "And") return Binary<uint8_t, uint8_t>(k, a, b, k.Out(0), LogicOp<Logic::kAnd>{});
  if (op == "Or") return Binary<uint8_t, uint8_t>(k, a, b, k.Out(0), LogicOp<Logic::kOr>{});
  return Binary<uint8_t, uint8_t>(k, a, b, k.Out(0), LogicOp<Logic::kXor>{});
}

Status Not(const KernelArgs& k) { return Unary<uint8_t, uint8_t>(k, NotOp{}); }

Status UnaryFloat(const KernelArgs& k) {
  static const std::map<std::string, Fn> fns = {{"Sigmoid", Fn::kSigmoid},
                                                {"Tanh", Fn::kTanh},
                                                {"Erf", Fn::kErf},
                                                {"Sqrt", Fn::kSqrt},
                                                {"Exp", Fn::kExp},
                                                {"Log", Fn::kLog},
                                                {"Reciprocal", Fn::kReciprocal},
                                                {"Floor", Fn::kFloor},
                                                {"Ceil", Fn::kCeil}};
  Fn fn = fns.at(k.node.op);
  return DispatchFloat(k.In(0).dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    switch (fn) {
      case Fn::kSigmoid:
        return Unary<T, T>(k, UnaryOp<Fn::kSigmoid>{});
      case Fn::kTanh:
        return Unary<T, T>(k, UnaryOp<Fn::kTanh>{});
      case Fn::kErf:
        return Unary<T, T>(k, UnaryOp<Fn::kErf>{});
      case Fn::kSqrt:
        return Unary<T, T>(k, UnaryOp<Fn::kSqrt>{});
      case Fn::kExp:
        return Unary<T, T>(k, UnaryOp<Fn::kExp>{});
      case Fn::kLog:
        return Unary<T, T>(k, UnaryOp<Fn::kLog>{});
      case Fn::kReciprocal:
        return Unary<T, T>(k, UnaryOp<Fn::kReciprocal>{});
      case Fn::kFloor:
        return Unary<T, T>(k, UnaryOp<Fn::kFloor>{});
      default:
        return Unary<T, T>(k, UnaryOp<Fn::kCeil>{});
    }
  });
}

Status UnaryNumeric(const KernelArgs& k) {
  const std::string& op = k.node.op;
  return DispatchNumeric(k.In(0).dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    if (op == "Neg") return Unary<T, T>(k, UnaryOp<Fn::kNeg>{});
    if (op == "Abs") return Unary<T, T>(k, UnaryOp<Fn::kAbs>{});
    return Unary<T, T>(k, UnaryOp<Fn::kRelu>{});
  });
}

// `copy`, when set, receives the result rounded to bf16 as well (bf16_copies.h).
__global__ void MulAddKernel(IndexMap<3> m, int64_t n, const float* a, const float* b, const float* c, float* out,
                             __nv_bfloat16* copy) {
  RANKD_GRID_LOOP(i, n) {
    int64_t off[3];
    m.Offsets(i, off);
    float r = fmaf(a[off[0]], b[off[1]], c[off[2]]);
    out[i] = r;
    if (copy) copy[i] = __float2bfloat16_rn(r);
  }
}

// A same-shape MulAdd's operand: fp32, or its producer's bf16 copy (bf16_copies.h).
struct Operand {
  const float* f32 = nullptr;
  const __nv_bfloat16* bf16 = nullptr;
  __device__ float At(int64_t i) const { return bf16 ? __bfloat162float(bf16[i]) : f32[i]; }
  // Elements 4q to 4q + 3 (16-byte aligned fp32, 8-byte aligned bf16).
  __device__ float4 Quad(int64_t q) const {
    if (!bf16) return reinterpret_cast<const float4*>(f32)[q];
    const uint2 raw = reinterpret_cast<const uint2*>(bf16)[q];
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  }
};

// All three operands of the output's shape, an element per step (any alignment). `out` null:
// the result goes to the bf16 copy alone.
__global__ void MulAddScalarKernel(Operand a, Operand b, Operand c, float* out, __nv_bfloat16* copy, int64_t n) {
  RANKD_GRID_LOOP(i, n) {
    float r = fmaf(a.At(i), b.At(i), c.At(i));
    if (out) out[i] = r;
    if (copy) copy[i] = __float2bfloat16_rn(r);
  }
}

// All three operands of the output's shape: four elements per step, no index arithmetic.
__global__ void MulAddSameShapeKernel(Operand a, Operand b, Operand c, float4* out, __nv_bfloat162* copy,
                                      int64_t quads) {
  RANKD_GRID_LOOP(i, quads) {
    float4 x = a.Quad(i), y = b.Quad(i), z = c.Quad(i);
    float4 r = make_float4(fmaf(x.x, y.x, z.x), fmaf(x.y, y.y, z.y), fmaf(x.z, y.z, z.z), fmaf(x.w, y.w, z.w));
    if (out) out[i] = r;
    if (copy) {
      copy[2 * i] = __float22bfloat162_rn(make_float2(r.x, r.y));
      copy[2 * i + 1] = __float22bfloat162_rn(make_float2(r.z, r.w));
    }
  }
}

bool AlignedTo(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// out = a * b + c over n elements of one shape; out may be a, b or c. Any operand may be read
// from its bf16 copy, and the result written to its bf16 copy alone (out null).
Status MulAddSameShape(cudaStream_t stream, Operand a, Operand b, Operand c, float* out, int64_t n, void* bf16_copy) {
  if (n <= 0) return Status::Ok();
  auto aligned = [](const Operand& f) { return f.bf16 ? AlignedTo(f.bf16, 8) : AlignedTo(f.f32, 16); };
  if (n % 4 == 0 && aligned(a) && aligned(b) && aligned(c) && AlignedTo(out, 16) && AlignedTo(bf16_copy, 8)) {
    MulAddSameShapeKernel<<<Blocks(n / 4), kThreads, 0, stream>>>(a, b, c, reinterpret_cast<float4*>(out),
                                                                  static_cast<__nv_bfloat162*>(bf16_copy), n / 4);
  } else {
    MulAddScalarKernel<<<Blocks(n), kThreads, 0, stream>>>(a, b, c, out, static_cast<__nv_bfloat16*>(bf16_copy), n);
  }
  return Check(cudaGetLastError(), "MulAddSameShape");
}

}  // namespace

Status MulAddArrays(cudaStream_t stream, MulAddOperand a, MulAddOperand b, MulAddOperand c, float* out, int64_t n,
                    void* bf16_copy) {
  auto operand = [](MulAddOperand x) { return Operand{x.f32, static_cast<const __nv_bfloat16*>(x.bf16)}; };
  return MulAddSameShape(stream, operand(a), operand(b), operand(c), out, n, bf16_copy);
}

namespace {

Status MulAdd(const KernelArgs& k) {
  const Tensor &a = k.In(0), &b = k.In(1), &c = k.In(2);
  Tensor& out = k.Out(0);
  if (out.size() == 0) return Status::Ok();
  const DeviceContext& d = *k.device;
  if (a.shape() == out.shape() && b.shape() == out.shape() && c.shape() == out.shape()) {
    Operand fa{a.data<float>(),
               d.bf16_a && d.bf16_a_source == a.raw() ? static_cast<const __nv_bfloat16*>(d.bf16_a) : nullptr};
    Operand fb{b.data<float>(),
               d.bf16_b && d.bf16_b_source == b.raw() ? static_cast<const __nv_bfloat16*>(d.bf16_b) : nullptr};
    Operand fc{c.data<float>(),
               d.bf16_c && d.bf16_c_source == c.raw() ? static_cast<const __nv_bfloat16*>(d.bf16_c) : nullptr};
    float* result = d.bf16_out && d.bf16_out_alone ? nullptr : out.data<float>();
    return MulAddSameShape(d.stream, fa, fb, fc, result, out.size(), d.bf16_out).WithContext(k.node.Describe());
  }
  if (d.bf16_a || d.bf16_b || d.bf16_c || d.bf16_out_alone)
    return Internal(k.node.Describe() + ": bf16 copies planned for a broadcasting MulAdd");
  const Shape* shapes[3] = {&a.shape(), &b.shape(), &c.shape()};
  RANKD_ASSIGN_OR_RETURN(IndexMap<3> m, BroadcastMap<3>(out.shape(), shapes));
  MulAddKernel<<<Blocks(out.size()), kThreads, 0, d.stream>>>(m, out.size(), a.data<float>(), b.data<float>(),
                                                              c.data<float>(), out.data<float>(),
                                                              static_cast<__nv_bfloat16*>(d.bf16_out));
  return Launched(k);
}

template <typename T>
__global__ void WhereKernel(IndexMap<3> m, int64_t n, const uint8_t* c, const T* x, const T* y, T* out) {
  RANKD_GRID_LOOP(i, n) {
    int64_t off[3];
    m.Offsets(i, off);
    out[i] = c[off[0]] ? x[off[1]] : y[off[2]];
  }
}

Status Where(const KernelArgs& k) {
  const Tensor &c = k.In(0), &x = k.In(1), &y = k.In(2);
  Tensor& out = k.Out(0);
  if (out.size() == 0) return Status::Ok();
  const Shape* shapes[3] = {&c.shape(), &x.shape(), &y.shape()};
  RANKD_ASSIGN_OR_RETURN(IndexMap<3> m, BroadcastMap<3>(out.shape(), shapes));
  return DispatchAny(x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    WhereKernel<<<Blocks(out.size()), kThreads, 0, k.device->stream>>>(m, out.size(), c.data<uint8_t>(), x.data<T>(),
                                                                       y.data<T>(), out.data<T>());
    return Launched(k);
  });
}

Status Clip(const KernelArgs& k) {
  return DispatchNumeric(k.In(0).dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    ClipOp<T> op{k.HasIn(1) ? k.In(1).data<T>() : nullptr, k.HasIn(2) ? k.In(2).data<T>() : nullptr};
    return Unary<T, T>(k, op);
  });
}

Status Cast(const KernelArgs& k) {
  return DispatchAny(k.In(0).dtype(), [&](auto from_tag) -> Status {
    using From = decltype(from_tag);
    return DispatchAny(k.Out(0).dtype(), [&](auto to_tag) -> Status {
      using To = decltype(to_tag);
      return Unary<From, To>(k, CastOp<To>{});
    });
  });
}

}  // namespace

void AppendElementwiseKernels(KernelTable& out) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) out[op] = Arith;
  out["Max"] = MaxMin;
  out["Min"] = MaxMin;
  out["Pow"] = Pow;
  out["Mod"] = Mod;
  for (const char* op : {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"}) out[op] = Compare;
  for (const char* op : {"And", "Or", "Xor"}) out[op] = LogicKernel;
  out["Not"] = Not;
  for (const char* op : {"Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil"}) {
    out[op] = UnaryFloat;
  }
  for (const char* op : {"Neg", "Relu", "Abs"}) out[op] = UnaryNumeric;
  out["Where"] = Where;
  out["MulAdd"] = MulAdd;
  out["Clip"] = Clip;
  out["Cast"] = Cast;
}

}  // namespace rankd::cuda
