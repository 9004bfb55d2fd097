// EinsumSpec: an Einsum equation reduced to permutes and one batched matrix product.
//
// Supported: one operand that is a pure permutation ("ij->ji"), and two operands where every
// letter is a batch letter (both inputs and output), a row letter (first input and output), a column
// letter (second input and output) or a contracted letter (both inputs, not the output). That covers
// the forms attention uses ("bqd,bkd->bqk", "bhqk,bhkd->bhqd", "bd,bld->bl"). Ellipses, repeated
// letters in one operand and letters summed out of a single operand are rejected as unimplemented.
#pragma once

#include <string>
#include <vector>

#include "model/graph.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

struct EinsumSpec {
  std::vector<std::string> inputs;  // letters per operand
  std::string output;
};

// Parses and checks an equation for `num_inputs` operands (explicit or implicit output).
StatusOr<EinsumSpec> ParseEinsum(const std::string& equation, size_t num_inputs, const Node& node);

// The concrete computation for given input shapes.
struct EinsumPlan {
  bool single = false;                    // one operand: out = permute(A, perm_a)
  std::vector<int64_t> perm_a;            // A -> [batch, rows, contracted]  (or -> output when single)
  std::vector<int64_t> perm_b;            // B -> [batch, contracted, cols]
  std::vector<int64_t> perm_out;          // [batch, rows, cols] -> output
  Shape a_permuted, b_permuted, c_shape;  // shapes after permuting, and of the product
  int64_t batch = 1, rows = 1, cols = 1, inner = 1;
  Shape output;
};

StatusOr<EinsumPlan> PlanEinsum(const EinsumSpec& spec, const std::vector<Shape>& shapes, const Node& node);

}  // namespace rankd
