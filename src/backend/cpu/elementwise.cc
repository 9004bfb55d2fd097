// CPU kernels of the element-wise ops (schemas in model/ops/elementwise_schemas.cc).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "backend/broadcast.h"
#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernels.h"

namespace rankd::cpu {
namespace {

template <typename T, typename U, typename Op>
void BinaryLoop(const Tensor& a, const Tensor& b, Tensor& out, Op op) {
  auto layout = MakeBroadcastLayout<2>(out.shape(), {&a.shape(), &b.shape()});
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  U* po = out.data<U>();
  ForEachRow<2>(layout, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
    const T* x = pa + off[0];
    const T* y = pb + off[1];
    U* z = po + o;
    if (st[0] && st[1]) {
      for (int64_t i = 0; i < n; ++i) z[i] = op(x[i], y[i]);
    } else if (st[0]) {
      T yv = *y;
      for (int64_t i = 0; i < n; ++i) z[i] = op(x[i], yv);
    } else if (st[1]) {
      T xv = *x;
      for (int64_t i = 0; i < n; ++i) z[i] = op(xv, y[i]);
    } else {
      U v = op(*x, *y);
      for (int64_t i = 0; i < n; ++i) z[i] = v;
    }
  });
}

template <typename T, typename Op>
void UnaryLoop(const Tensor& a, Tensor& out, Op op) {
  const T* x = a.data<T>();
  T* z = out.data<T>();
  ParallelFor(a.size(), 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) z[i] = op(x[i]);
  });
}

template <typename T>
T IntDiv(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    if (y == 0) return T{0};  // division by zero is defined as 0, not a crash
    if (y == -1) return static_cast<T>(T{0} - static_cast<std::make_unsigned_t<T>>(x));  // MIN / -1 wraps, not traps
    return static_cast<T>(x / y);
  } else {
    return x / y;
  }
}

// Integer sums, differences and products wrap around (two's complement, as ONNX Runtime's do);
// in signed arithmetic an overflow would be undefined.
template <typename T, typename Op>
T Wrapping(T x, T y, Op op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(op(static_cast<U>(x), static_cast<U>(y)));
  } else {
    return op(x, y);
  }
}

Status Arith(const KernelArgs& k) {
  const std::string& op = k.node.op;
  return DispatchNumeric(k.In(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Tensor &a = k.In(0), &b = k.In(1);
    Tensor& out = k.Out(0);
    if (op == "Add")
      BinaryLoop<T, T>(a, b, out, [](T x, T y) { return Wrapping(x, y, std::plus<>()); });
    else if (op == "Sub")
      BinaryLoop<T, T>(a, b, out, [](T x, T y) { return Wrapping(x, y, std::minus<>()); });
    else if (op == "Mul")
      BinaryLoop<T, T>(a, b, out, [](T x, T y) { return Wrapping(x, y, std::multiplies<>()); });
    else
      BinaryLoop<T, T>(a, b, out, [](T x, T y) { return IntDiv(x, y); });
  });
}

// ONNX's Mod (schema: elementwise_schemas.cc). An integer remainder by 0 is defined as 0, as Div's
// quotient is; by -1 it is 0 (and the lowest value's would trap).
template <typename T>
T Remainder(T x, T y, bool c_fmod) {
  if constexpr (std::is_integral_v<T>) {
    if (y == 0 || y == T(-1)) return T{0};
    T r = static_cast<T>(x % y);
    if (!c_fmod && r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);  // the divisor's sign
    return r;
  } else {
    return std::fmod(x, y);
  }
}

Status Mod(const KernelArgs& k) {
  const bool c_fmod = k.node.GetInt("fmod", 0) == 1;
  return DispatchNumeric(k.In(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    BinaryLoop<T, T>(k.In(0), k.In(1), k.Out(0), [c_fmod](T x, T y) { return Remainder(x, y, c_fmod); });
  });
}

Status MaxMin(const KernelArgs& k) {
  bool is_max = k.node.op == "Max";
  Tensor& out = k.Out(0);
  return DispatchNumeric(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto pick = [is_max](T x, T y) {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
      }
      return is_max ? std::max(x, y) : std::min(x, y);
    };
    if (k.in.size() == 1) {
      UnaryLoop<T>(k.In(0), out, [](T x) { return x; });
      return;
    }
    BinaryLoop<T, T>(k.In(0), k.In(1), out, pick);
    for (size_t i = 2; i < k.in.size(); ++i) {
      BinaryLoop<T, T>(out, k.In(static_cast<int>(i)), out, pick);
    }
  });
}

Status Pow(const KernelArgs& k) {
  const Tensor &a = k.In(0), &b = k.In(1);
  Tensor& out = k.Out(0);
  return DispatchFloat(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (b.dtype() == a.dtype()) {
      BinaryLoop<T, T>(a, b, out, [](T x, T y) {
        if (y == T(2)) return x * x;
        return static_cast<T>(std::pow(x, y));
      });
      return;
    }
    // Mixed types: the exponent is a broadcast tensor of another dtype; convert it first.
    // Exponents are tiny (scalars in exported graphs), so a per-element read is fine.
    auto layout = MakeBroadcastLayout<2>(out.shape(), {&a.shape(), &b.shape()});
    const T* pa = a.data<T>();
    T* po = out.data<T>();
    ForEachRow<2>(layout,
                  [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                    for (int64_t i = 0; i < n; ++i) {
                      T x = pa[off[0] + i * st[0]];
                      T y = static_cast<T>(b.ScalarAsDouble(off[1] + i * st[1]));
                      po[o + i] = static_cast<T>(std::pow(x, y));
                    }
                  });
  });
}

Status Compare(const KernelArgs& k) {
  const std::string& op = k.node.op;
  DType t = k.In(0).dtype() == DType::kBool ? DType::kU8 : k.In(0).dtype();
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const Tensor &a = k.In(0), &b = k.In(1);
    Tensor& out = k.Out(0);
    if (op == "Equal")
      BinaryLoop<T, uint8_t>(a, b, out, [](T x, T y) { return static_cast<uint8_t>(x == y); });
    else if (op == "Greater")
      BinaryLoop<T, uint8_t>(a, b, out, [](T x, T y) { return static_cast<uint8_t>(x > y); });
    else if (op == "GreaterOrEqual")
      BinaryLoop<T, uint8_t>(a, b, out, [](T x, T y) { return static_cast<uint8_t>(x >= y); });
    else if (op == "Less")
      BinaryLoop<T, uint8_t>(a, b, out, [](T x, T y) { return static_cast<uint8_t>(x < y); });
    else
      BinaryLoop<T, uint8_t>(a, b, out, [](T x, T y) { return static_cast<uint8_t>(x <= y); });
  };
  if (t == DType::kU8) {
    run(uint8_t{});
    return Status::Ok();
  }
  return DispatchNumeric(t, run);
}

Status Logic(const KernelArgs& k) {
  const std::string& op = k.node.op;
  auto f = op == "And"  ? +[](uint8_t x, uint8_t y) { return static_cast<uint8_t>(x && y); }
           : op == "Or" ? +[](uint8_t x, uint8_t y) { return static_cast<uint8_t>(x || y); }
                        : +[](uint8_t x, uint8_t y) { return static_cast<uint8_t>((x != 0) != (y != 0)); };
  BinaryLoop<uint8_t, uint8_t>(k.In(0), k.In(1), k.Out(0), f);
  return Status::Ok();
}

Status Not(const KernelArgs& k) {
  UnaryLoop<uint8_t>(k.In(0), k.Out(0), [](uint8_t x) { return static_cast<uint8_t>(!x); });
  return Status::Ok();
}

Status UnaryFloat(const KernelArgs& k) {
  const std::string& op = k.node.op;
  return DispatchFloat(k.In(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Tensor& a = k.In(0);
    Tensor& out = k.Out(0);
    if (op == "Sigmoid")
      UnaryLoop<T>(a, out, [](T x) { return T(1) / (T(1) + std::exp(-x)); });
    else if (op == "Tanh")
      UnaryLoop<T>(a, out, [](T x) { return std::tanh(x); });
    else if (op == "Erf")
      UnaryLoop<T>(a, out, [](T x) { return std::erf(x); });
    else if (op == "Sqrt")
      UnaryLoop<T>(a, out, [](T x) { return std::sqrt(x); });
    else if (op == "Exp")
      UnaryLoop<T>(a, out, [](T x) { return std::exp(x); });
    else if (op == "Log")
      UnaryLoop<T>(a, out, [](T x) { return std::log(x); });
    else if (op == "Reciprocal")
      UnaryLoop<T>(a, out, [](T x) { return T(1) / x; });
    else if (op == "Floor")
      UnaryLoop<T>(a, out, [](T x) { return std::floor(x); });
    else
      UnaryLoop<T>(a, out, [](T x) { return std::ceil(x); });
  });
}

Status UnaryNumeric(const KernelArgs& k) {
  const std::string& op = k.node.op;
  return DispatchNumeric(k.In(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (op == "Neg")
      UnaryLoop<T>(k.In(0), k.Out(0), [](T x) { return static_cast<T>(-x); });
    else if (op == "Abs")
      UnaryLoop<T>(k.In(0), k.Out(0), [](T x) { return x < 0 ? static_cast<T>(-x) : x; });
    else
      UnaryLoop<T>(k.In(0), k.Out(0), [](T x) { return x > T(0) ? x : T(0); });
  });
}

Status MulAdd(const KernelArgs& k) {
  const Tensor &a = k.In(0), &b = k.In(1), &c = k.In(2);
  Tensor& out = k.Out(0);
  auto layout = MakeBroadcastLayout<3>(out.shape(), {&a.shape(), &b.shape(), &c.shape()});
  const float *pa = a.data<float>(), *pb = b.data<float>(), *pc = c.data<float>();
  float* po = out.data<float>();
  ForEachRow<3>(layout, [&](int64_t o, const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
    for (int64_t i = 0; i < n; ++i)
      po[o + i] = pa[off[0] + i * st[0]] * pb[off[1] + i * st[1]] + pc[off[2] + i * st[2]];
  });
  return Status::Ok();
}

Status Where(const KernelArgs& k) {
  const Tensor &c = k.In(0), &x = k.In(1), &y = k.In(2);
  Tensor& out = k.Out(0);
  return DispatchAny(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto layout = MakeBroadcastLayout<3>(out.shape(), {&c.shape(), &x.shape(), &y.shape()});
    const uint8_t* pc = c.data<uint8_t>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    ForEachRow<3>(layout,
                  [&](int64_t o, const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
                    for (int64_t i = 0; i < n; ++i) {
                      po[o + i] = pc[off[0] + i * st[0]] ? px[off[1] + i * st[1]] : py[off[2] + i * st[2]];
                    }
                  });
  });
}

Status Clip(const KernelArgs& k) {
  return DispatchNumeric(k.In(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (k.HasIn(1)) lo = k.In(1).data<T>()[0];
    if (k.HasIn(2)) hi = k.In(2).data<T>()[0];
    UnaryLoop<T>(k.In(0), k.Out(0), [lo, hi](T x) { return std::min(std::max(x, lo), hi); });
  });
}

Status Cast(const KernelArgs& k) {
  const Tensor& a = k.In(0);
  Tensor& out = k.Out(0);
  return DispatchAny(a.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    Status s = DispatchAny(out.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      const From* x = a.data<From>();
      To* z = out.data<To>();
      ParallelFor(a.size(), 2, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) z[i] = Convert<To>(x[i]);
      });
    });
    (void)s;  // both dtypes were validated by the schema
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
  for (const char* op : {"And", "Or", "Xor"}) out[op] = Logic;
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

}  // namespace rankd::cpu
