#include "common/host_memory.h"

#include <fstream>
#include <iterator>
#include <sstream>

namespace rankd {

StatusOr<int64_t> ParseMemAvailable(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("MemAvailable:")) continue;
    std::istringstream fields(line.substr(13));
    int64_t kb = -1;
    std::string unit;
    if (fields >> kb >> unit && kb >= 0 && unit == "kB") return kb * 1024;
    return InvalidArgument("unreadable MemAvailable line: '" + line + "'");
  }
  return InvalidArgument("no MemAvailable line in the memory information");
}

StatusOr<int64_t> AvailableHostMemory() {
  std::ifstream f("/proc/meminfo");
  if (!f) return Unavailable("cannot read /proc/meminfo");
  return ParseMemAvailable(std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()));
}

}  // namespace rankd
