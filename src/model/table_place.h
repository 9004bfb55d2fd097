// Where a config's `tables.tiers` may put a table, as text: "gpu", "cache", "host", "disk", or "gpu:N" /
// "gpu:N,M,..." (on those GPUs, whole or split by rows). The one reading of that text: the config
// checks tiers with it, and embedding/table_budget.h turns it into a TableTier.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace rankd {

struct TablePlaceText {
  std::string tier;       // gpu, cache, host or disk
  std::vector<int> gpus;  // the GPU indices of "gpu:N,M,..."; empty otherwise
};

// `text` read as a table's place; nullopt for anything else (gpu:all included).
std::optional<TablePlaceText> ParseTablePlaceText(const std::string& text);

}  // namespace rankd
