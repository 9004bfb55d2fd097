#include "tools/request_file.h"

#include <algorithm>
#include <fstream>

#include "frontend/kserve_json.h"

namespace rankd {

StatusOr<std::vector<RequestLine>> ReadRequestFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read '" + path + "'");
  std::vector<RequestLine> lines;
  bool nonzero = false;
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto r = ParseInferRequest(text, std::string_view(), JsonLimits{size_t{1} << 30, int64_t{1} << 30, 8});
    if (!r.ok()) return r.status().WithContext(path + ": line " + std::to_string(number));
    for (const InferInput& x : r->request.inputs) {
      if (x.is_bytes()) {
        nonzero = nonzero || !x.strings.bytes.empty();
        continue;
      }
      for (int64_t i = 0; i < x.data.size() && !nonzero; ++i) nonzero = x.data.ScalarAsDouble(i) != 0;
    }
    lines.push_back({std::move(text), std::move(r->request), std::move(r->length_sums)});
  }
  if (lines.empty()) return InvalidArgument(path + " holds no requests");
  if (!nonzero) return InvalidArgument(path + ": every input is all zeros; refusing to time it");
  return lines;
}

double QuarterSpread(const std::vector<std::vector<double>>& quarters) {
  std::vector<double> medians;
  for (std::vector<double> part : quarters) {
    if (part.size() < 2) return 0;
    std::nth_element(part.begin(), part.begin() + static_cast<std::ptrdiff_t>(part.size() / 2), part.end());
    medians.push_back(part[part.size() / 2]);
  }
  if (medians.empty()) return 0;
  auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
  return *lo > 0 ? *hi / *lo - 1 : 0;
}

}  // namespace rankd
