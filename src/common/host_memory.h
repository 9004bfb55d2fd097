// How much host memory the system can still give this process without swapping: the kernel's
// MemAvailable (/proc/meminfo), which a load checks before it page-locks copies of tables there.
#pragma once

#include <cstdint>
#include <string>

#include "rankd/status.h"

namespace rankd {

// MemAvailable in bytes, from `meminfo` (the text of /proc/meminfo); InvalidArgument when the text
// has no such line.
StatusOr<int64_t> ParseMemAvailable(const std::string& meminfo);
// The same from /proc/meminfo; Unavailable where it cannot be read.
StatusOr<int64_t> AvailableHostMemory();

}  // namespace rankd
