// Requests whose lookups' ids are drawn anew, for `rankd bench engine --fresh-ids`: a request file
// replays a few requests, whose rows a GPU or host cache soon holds whole; live traffic keeps
// asking for rows it has not seen. Each variant of a request keeps its shapes, its dense inputs
// and its empty slots (negative ids), and draws every other id of an input a lookup reads from a
// Zipf law over that table's rows with the hot rows rankd_zoo's requests have (rank r at row
// ((r - 1) * 2654435761 + 97) mod rows), so a cache warmed on the file meets the same hot set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankd/request.h"
#include "serving/model.h"

namespace rankd {

struct LookupInput {
  std::string input;  // the request input, by name
  int64_t rows = 0;   // the rows of the table it looks up (the fewest, if it feeds several)
};

// The request inputs whose ids the model's lookups read, with their tables' rows (a ragged
// input X reaches the graph as X.values).
std::vector<LookupInput> FindLookupInputs(const Model& model);

// A copy of `request`, its lookup inputs' ids drawn anew with exponent `zipf`, from `seed`.
InferRequest FreshIdVariant(const InferRequest& request, const std::vector<LookupInput>& lookups, double zipf,
                            uint64_t seed);

// `variants` copies of each request (in turn: request 0's first, request 1's first, ...), their
// lookup inputs' ids drawn anew with exponent `zipf`, from `seed`.
std::vector<InferRequest> FreshIdVariants(const std::vector<InferRequest>& requests,
                                          const std::vector<LookupInput>& lookups, int variants, double zipf,
                                          uint64_t seed);

}  // namespace rankd
