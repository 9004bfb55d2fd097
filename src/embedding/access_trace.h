// Synthetic access traces for the cache simulator: row ids drawn from a Zipf law over a table's
// rows, with the hot set fixed (stationary) or rotating (drifting).
//
// Rank r (1 = most popular) is drawn with probability proportional to r^-s by rejection-inversion
// (Hörmann and Derflinger, 1996: O(1) memory, any number of rows), and mapped to a row by a
// bijection of [0, rows) that scatters the hot rows over the table. With drift, every `drift_every`
// accesses the mapping shifts by `drift_rows`: the rows that were hottest cool and others take
// their ranks, as the items of a feed do over a day.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace rankd {

struct TraceOptions {
  int64_t rows = 1'000'000;  // the table's rows
  double zipf = 1.05;        // the exponent s (> 0)
  int64_t accesses = 1'000'000;
  int64_t drift_every = 0;  // accesses between shifts of the hot set; 0: stationary
  int64_t drift_rows = 0;   // how far the ranks move at each shift
  uint64_t seed = 1;
};

// Draws ranks 1..n with P(r) proportional to r^-s.
class ZipfSampler {
 public:
  ZipfSampler(int64_t n, double s);
  int64_t operator()(std::mt19937_64& rng) const;

 private:
  double H(double x) const;     // the integral of x^-s, shifted so that H is smooth at s = 1
  double HInv(double x) const;  // its inverse
  int64_t n_;
  double s_;
  double h_x1_, h_n_, shortcut_;
};

std::vector<uint64_t> MakeTrace(const TraceOptions& options);

}  // namespace rankd
