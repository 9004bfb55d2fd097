// A BYTES input turned into the ids its config asks for (docs/strings.md): each string hashed to a
// bucket, or each row's one string split on a delimiter into a list whose pieces are parsed as
// decimal ids or hashed. The result is an input of the graph's integer type (dense, or flat values
// with lengths for a ragged input), as if the client had sent the ids; every string is checked
// against the config's limits on the way, and a mistake names the input and the element.
#pragma once

#include "model/config.h"
#include "rankd/request.h"

namespace rankd {

StatusOr<InferInput> StringsToIds(const InputConfig& config, const InferInput& in);

}  // namespace rankd
