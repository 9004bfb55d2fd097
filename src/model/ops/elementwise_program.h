// ElementwiseProgram: what a FusedElementwise node computes for each output element.
//
// FuseElementwiseChains (elementwise_fusion.cc) turns a chain of FP32 element-wise ops into one
// FusedElementwise node whose "program" attribute lists the ops in order, one per ';':
//
//   Mul x0 x1;Add t0 0x1p-1;Sigmoid t1
//
// An operand is xK (the node's input K, broadcast to the output's shape), tJ (the result of the
// J-th op, J before this op) or a float literal (hexadecimal, exact). The last op's result is the
// output. Every backend computes each op as the unfused op's CPU kernel does (cpu/elementwise.cc).
#pragma once

#include <string>
#include <vector>

#include "rankd/status.h"

namespace rankd {

enum class EwOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMax,
  kMin,  // two operands
  kMulAdd,
  kClip,  // three: a * b + c; min(max(a, b), c)
  kNeg,
  kRelu,
  kAbs,
  kSigmoid,
  kTanh,
  kErf,
  kSqrt,
  kExp,
  kLog,
  kReciprocal,
  kFloor,
  kCeil,  // one
};

struct EwOperand {
  enum Kind { kInput, kTemp, kImmediate } kind = kInput;
  int index = 0;       // kInput, kTemp
  float value = 0.0f;  // kImmediate
};

struct EwInstruction {
  EwOp op = EwOp::kAdd;
  std::vector<EwOperand> operands;
};

struct ElementwiseProgram {
  std::vector<EwInstruction> code;

  // The program text (the node attribute).
  std::string ToString() const;
  // Parses and checks a program text for a node with `num_inputs` inputs: known ops, their operand
  // counts, inputs below num_inputs, temporaries defined before use. Errors say what is wrong.
  static StatusOr<ElementwiseProgram> Parse(const std::string& text, int num_inputs);
};

// The op an ONNX element-wise op becomes, by name ("Sigmoid" -> kSigmoid); false when it has none.
bool EwOpFromName(const std::string& name, EwOp* op);
const char* EwOpName(EwOp op);
// Operands the op takes.
int EwOpArity(EwOp op);

// Limits of one fused node (the CUDA kernel's parameter block holds this many inputs and dims).
constexpr int kMaxFusedInputs = 8;
constexpr int kMaxFusedOps = 48;
constexpr int kMaxFusedRank = 6;

}  // namespace rankd
