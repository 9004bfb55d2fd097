// Time elapsed on the steady clock, for the warm-up fits and the routes' latency records.
#pragma once

#include <chrono>

namespace rankd {

inline double MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace rankd
