// bf16 copies written by producers. With bf16 precision a product rounds its fp32 activation
// operand to bf16 before cuBLASLt reads it: one more pass over the activation (read 4 bytes, write
// 2 per element). When the activation's producer is a kernel that can write a second, bf16 copy of
// its result as it goes (MulAdd, ConcatEmbeddingBags), the executor gives it room for one and the
// product reads that copy instead: the same bits, one launch and one read of the activation fewer.
// A product whose result only readers of copies read (an MLP's hidden layer read by the next
// product; DCNv2's up-projection read by its multiply-add as a factor) writes that result as the
// bf16 copy alone, cuBLASLt rounding its output: no fp32 result, no conversion, half the bytes
// written and read (the bits may differ from rounding an fp32 result where cuBLASLt picks another
// algorithm for a bf16 output). A same-shape MulAdd reads such a product's copy as its factor, and
// writes its own result as the copy alone where only products read it (DCNv2's last cross layer,
// read by the top MLP): the same bits as its copy beside an fp32 result no one reads.
// Where cuBLASLt has no algorithm writing bf16 with the product's epilogue, the product writes
// fp32 and converts it itself (on an H100 that was so for four of the DCNv2 products,
// most likely the ones with an fp32 bias; a bf16 bias would be the next thing to try).
// With bf16-activations precision (backend.h) the rule that a MulAdd rounds nothing its producer
// did not is dropped: a same-shape MulAdd reads any operand's copy (its addend too), and a MulAdd
// or ConcatEmbeddingBags whose readers all read copies writes its copy alone. DCNv2's input and
// residuals then stay bf16 throughout the cross network: each cross layer's MulAdd reads 6 bytes
// an element and writes 2, where it read 10 and wrote 6.
#pragma once

#include <cstdint>
#include <vector>

namespace rankd {
class Plan;
struct Node;
}  // namespace rankd

namespace rankd::cuda {

struct Bf16Copies {
  // Per plan step: the byte offset of the bf16 copy of its first output that it writes, or -1.
  std::vector<int64_t> written;
  // Per plan step: whether that copy is written alone, without the fp32 result (a product always;
  // a MulAdd that only products read).
  std::vector<bool> alone;
  // Per plan step: the byte offset of the bf16 copy of its first input (a product's A operand, a
  // MulAdd's first factor), or -1.
  std::vector<int64_t> read;
  // Per plan step: the same for its second copy slot (a MulAdd's second factor; the m of a
  // product with a multiply-add epilogue, bf16-activations only), or -1 (Bf16CopyInput names the
  // input).
  std::vector<int64_t> read_second;
  // Per plan step: the same for its third slot (a MulAdd's addend, that product's c;
  // bf16-activations only), or -1.
  std::vector<int64_t> read_third;
  int64_t bytes = 0;  // room for all copies; a copy's room is reused once its last reader ran,
                      // unless the plan keeps its values apart (Plan::separate_rooms)
};

// The copies worth making in `plan`: an FP32 value produced by a kernel that can write one and
// read as the first operand of a MatMul or Gemm, or produced by a product writing the copy alone
// and read as a factor of a same-shape MulAdd; with bf16_activations, any such value read by a
// same-shape MulAdd (see above).
Bf16Copies PlanBf16Copies(const Plan& plan, bool bf16_activations = false);

// The input a step reads through copy slot 0, 1 or 2 (read, read_second, read_third): the slot
// itself, but inputs 3 and 4 (m and c) for slots 1 and 2 of a product with a multiply-add epilogue.
int Bf16CopyInput(const Node& node, int slot);

// For tests: with false, PlanBf16Copies plans none (every product converts its operands).
void EnableBf16Copies(bool on);

}  // namespace rankd::cuda
