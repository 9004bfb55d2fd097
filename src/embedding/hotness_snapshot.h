// A hotness snapshot: the keys a cache held and how often each was seen, saved by one run so that
// the next starts warm (CachePolicy::Snapshot, CachePolicy::WarmStart).
//
// The file: the 8 bytes "RKDHOT1\n", a little-endian uint64 count, then per key its little-endian
// uint64 key and one byte of count (0-255), most frequent first. Written to PATH.tmp and renamed
// over PATH, so a crash mid-write leaves the previous snapshot.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rankd/status.h"

namespace rankd {

using HotKeys = std::vector<std::pair<uint64_t, int>>;

Status SaveHotness(const std::string& path, const HotKeys& hottest);
// InvalidArgument for a file that is not a snapshot or is cut short; NotFound when it is absent.
StatusOr<HotKeys> LoadHotness(const std::string& path);

}  // namespace rankd
