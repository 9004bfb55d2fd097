#include "model/table_place.h"

#include "model/config.h"

namespace rankd {

std::optional<TablePlaceText> ParseTablePlaceText(const std::string& text) {
  if (text == "gpu" || text == "cache" || text == "host" || text == "disk") return TablePlaceText{text, {}};
  if (!text.starts_with("gpu:")) return std::nullopt;
  auto listed = ParseGpuSet(text.substr(4));
  if (!listed.ok() || listed->all) return std::nullopt;
  return TablePlaceText{"gpu", listed->ids};
}

}  // namespace rankd
