// A hotness snapshot: the rows caches held and how often each was seen, saved by one run so that
// the next starts warm (CachePolicy::Snapshot, CachePolicy::WarmStart).
//
// The file: the 8 bytes "RKDHOT2\n"; a little-endian uint64 count of tables, then per table a
// little-endian uint32 length and its name; a little-endian uint64 count of keys, then per key its
// little-endian uint64 key (RowKey(t, row), t the table's place in the file's list) and one byte of
// count (0-255), most frequent first. The names let a model whose tables were added, dropped or
// reordered since the save warm each table from its own rows (RekeyHotness). A version-1 file
// ("RKDHOT1\n", no table list: t was the table's place in the model that saved it) is still read,
// its keys kept as saved. Written to PATH.tmp and renamed over PATH, so a crash mid-write leaves
// the previous snapshot.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rankd/status.h"

namespace rankd {

using HotKeys = std::vector<std::pair<uint64_t, int>>;

struct HotnessSnapshot {
  std::vector<std::string> tables;  // by RowKey's table index; empty: keys as saved (a version-1 file)
  HotKeys keys;
};

// `tables`: the names of the tables `hottest`'s keys index (empty: none, the keys stay as given).
Status SaveHotness(const std::string& path, std::span<const std::string> tables, const HotKeys& hottest);
// InvalidArgument for a file that is not a snapshot or is cut short; NotFound when it is absent.
StatusOr<HotnessSnapshot> LoadHotness(const std::string& path);
// The snapshot's keys with their table index moved to the place of the table of the same name in
// `tables` (the loading model's); keys of a table `tables` does not name are dropped. A snapshot
// without names gives its keys as they are.
HotKeys RekeyHotness(HotnessSnapshot snapshot, std::span<const std::string> tables);

}  // namespace rankd
