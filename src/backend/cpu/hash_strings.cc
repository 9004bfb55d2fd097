// CPU kernel of HashStrings (model/ops/hash_strings.h): each record's string hashed by Debian's
// libraries (common/string_hash.h), the reference the CUDA kernel is tested against.
#include "model/ops/hash_strings.h"

#include <string_view>

#include "backend/cpu/kernels.h"
#include "common/string_hash.h"

namespace rankd::cpu {
namespace {

template <typename Id>
Status HashRecords(const KernelArgs& k, StringHash h, uint64_t seed, uint64_t buckets) {
  const int64_t* records = k.In(0).data<int64_t>();
  Id* out = k.Out(0).data<Id>();
  const int64_t count = k.Out(0).size();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t at = records[2 * i], length = records[2 * i + 1];
    if (length == hash_strings::kPrehashed) {
      out[i] = static_cast<Id>(at);
      continue;
    }
    if (length < 0 || (length > 0 && at == 0)) {
      return Internal(k.node.Describe() + ": record " + std::to_string(i) + " is not a string");
    }
    const std::string_view s(reinterpret_cast<const char*>(static_cast<uintptr_t>(at)), static_cast<size_t>(length));
    out[i] = static_cast<Id>(HashString(h, seed, s) % buckets);
  }
  return Status::Ok();
}

Status HashStrings(const KernelArgs& k) {
  const StringHash h = *StringHashFromName(k.node.GetString("function", ""));
  const auto seed = static_cast<uint64_t>(k.node.GetInt("seed", 0));
  const auto buckets = static_cast<uint64_t>(k.node.GetInt("buckets", 1));
  return k.Out(0).dtype() == DType::kI32 ? HashRecords<int32_t>(k, h, seed, buckets)
                                         : HashRecords<int64_t>(k, h, seed, buckets);
}

}  // namespace

void AppendStringKernels(KernelTable& out) { out["HashStrings"] = HashStrings; }

}  // namespace rankd::cpu
