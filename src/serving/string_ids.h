// A BYTES input turned into the ids its config asks for (docs/strings.md): each string hashed to a
// bucket, or each row's one string split on a delimiter into a list whose pieces are parsed as
// decimal ids or hashed. The result is an input of the graph's integer type (dense, or flat values
// with lengths for a ragged input), as if the client had sent the ids; every string is checked
// against the config's limits on the way, and a mistake names the input and the element. A
// backend that hashes the strings itself is given their records instead.
#pragma once

#include "model/config.h"
#include "rankd/request.h"

namespace rankd {

StatusOr<InferInput> StringsToIds(const InputConfig& config, const InferInput& in);

// The records (model/ops/hash_strings.h) of a BYTES input the model's backend hashes
// (InputConfig::HashedByBackend), INT64 [strings' shape..., 2], after the same checks as
// StringsToIds. Each record points into `bytes`, the strings copied into a request tensor, which
// the caller keeps until the request has run; where `device_reads` and that copy is not pinned
// (the pinned pool spent), the strings are hashed here instead and `bytes` is left undefined.
StatusOr<Tensor> StringRecords(const InputConfig& config, const InferInput& in, bool device_reads, Tensor& bytes);

}  // namespace rankd
