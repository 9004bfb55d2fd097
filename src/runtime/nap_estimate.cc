#include "runtime/nap_estimate.h"

#include <algorithm>

namespace rankd {

double NapEstimate::NapUs() const {
  if (measured_ < 2 || estimate_us_ < kShortestUs) return 0;
  return 0.8 * estimate_us_;
}

void NapEstimate::DoneOnWaking() { estimate_us_ *= 0.5; }

void NapEstimate::Waited(double waited_us) {
  if (measured_ == 0) {
    estimate_us_ = waited_us;
  } else if (measured_ == 1) {
    estimate_us_ = std::min(estimate_us_, waited_us);
  } else {
    estimate_us_ = 0.9 * estimate_us_ + 0.1 * std::min(waited_us, 2 * estimate_us_);
  }
  measured_ = std::min(measured_ + 1, 2);
}

}  // namespace rankd
