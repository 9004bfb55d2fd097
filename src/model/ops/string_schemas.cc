// Shape function of HashStrings (model/ops/hash_strings.h).
#include "common/string_hash.h"
#include "model/ops/hash_strings.h"
#include "model/ops/op_schema.h"

namespace rankd {
namespace {

Status CheckHashStrings(const Node& n) {
  if (!StringHashFromName(n.GetString("function", ""))) {
    return InvalidArgument(n.Describe() + ": unknown hash function '" + n.GetString("function", "") + "'");
  }
  if (n.GetInt("buckets", 0) <= 0) return InvalidArgument(n.Describe() + ": buckets must be positive");
  const DType dtype = DTypeFromName(n.GetString("dtype", "")).value_or(DType::kInvalid);
  if (dtype != DType::kI64 && dtype != DType::kI32) return InvalidArgument(n.Describe() + ": ids are INT64 or INT32");
  return Status::Ok();
}

Status InferHashStrings(InferContext& c) {
  const TensorMeta& records = c.in(0);
  if (records.dtype != DType::kI64 || records.shape.empty() || records.shape.back() != hash_strings::kRecordWidth) {
    return c.Error("records must be INT64 [..., 2]");
  }
  Shape ids(records.shape.begin(), records.shape.end() - 1);
  c.out(0) = {*DTypeFromName(c.node.GetString("dtype", "")), ids, nullptr};
  return Status::Ok();
}

}  // namespace

void AppendStringSchemas(std::vector<OpSchema>& out) {
  out.push_back({"HashStrings", 1, 1, CheckHashStrings, InferHashStrings});
}

}  // namespace rankd
