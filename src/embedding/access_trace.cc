#include "embedding/access_trace.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rankd {
namespace {

// log1p(x) / x and expm1(x) / x, exact near 0 where the quotients lose their digits.
double Log1pOverX(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}
double Expm1OverX(double x) {
  return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1 + x * 0.5 * (1 + x * (1.0 / 3) * (1 + 0.25 * x));
}

// An odd step coprime with `rows`, so that r -> (r * step + offset) mod rows is a bijection.
uint64_t CoprimeStep(uint64_t rows) {
  uint64_t step = 0x9e3779b97f4a7c15ULL % rows;
  while (step == 0 || std::gcd(step, rows) != 1) ++step;
  return step;
}

}  // namespace

ZipfSampler::ZipfSampler(int64_t n, double s) : n_(std::max<int64_t>(n, 1)), s_(s) {
  h_x1_ = H(1.5) - 1;
  h_n_ = H(static_cast<double>(n_) + 0.5);
  shortcut_ = 2 - HInv(H(2.5) - std::exp(-s_ * std::log(2.0)));
}

double ZipfSampler::H(double x) const {
  const double log_x = std::log(x);
  return Expm1OverX((1 - s_) * log_x) * log_x;
}

double ZipfSampler::HInv(double x) const {
  double t = x * (1 - s_);
  t = std::max(t, -1.0);  // rounding may step just past the domain
  return std::exp(Log1pOverX(t) * x);
}

int64_t ZipfSampler::operator()(std::mt19937_64& rng) const {
  std::uniform_real_distribution<double> uniform(0, 1);
  for (;;) {
    const double u = h_n_ + uniform(rng) * (h_x1_ - h_n_);
    const double x = HInv(u);
    const auto k = std::clamp<int64_t>(static_cast<int64_t>(x + 0.5), 1, n_);
    const double kd = static_cast<double>(k);
    if (kd - x <= shortcut_ || u >= H(kd + 0.5) - std::exp(-s_ * std::log(kd))) return k;
  }
}

std::vector<uint64_t> MakeTrace(const TraceOptions& options) {
  const auto rows = static_cast<uint64_t>(std::max<int64_t>(options.rows, 1));
  const uint64_t step = CoprimeStep(rows);
  ZipfSampler zipf(options.rows, options.zipf);
  std::mt19937_64 rng(options.seed);
  std::vector<uint64_t> trace;
  trace.reserve(static_cast<size_t>(std::max<int64_t>(options.accesses, 0)));
  uint64_t offset = 0;
  for (int64_t i = 0; i < options.accesses; ++i) {
    if (options.drift_every > 0 && i > 0 && i % options.drift_every == 0) {
      offset = (offset + static_cast<uint64_t>(options.drift_rows)) % rows;
    }
    const auto rank = static_cast<uint64_t>(zipf(rng) - 1);
    // (rank + offset) first: a shift moves every rank to the row the next rank had.
    trace.push_back(static_cast<unsigned __int128>((rank + offset) % rows) * step % rows);
  }
  return trace;
}

}  // namespace rankd
