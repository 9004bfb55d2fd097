#include "model/ops/elementwise_program.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace rankd {
namespace {

struct OpInfo {
  EwOp op;
  const char* name;
  int arity;
};

constexpr OpInfo kOps[] = {
    {EwOp::kAdd, "Add", 2},
    {EwOp::kSub, "Sub", 2},
    {EwOp::kMul, "Mul", 2},
    {EwOp::kDiv, "Div", 2},
    {EwOp::kPow, "Pow", 2},
    {EwOp::kMax, "Max", 2},
    {EwOp::kMin, "Min", 2},
    {EwOp::kMulAdd, "MulAdd", 3},
    {EwOp::kClip, "Clip", 3},
    {EwOp::kNeg, "Neg", 1},
    {EwOp::kRelu, "Relu", 1},
    {EwOp::kAbs, "Abs", 1},
    {EwOp::kSigmoid, "Sigmoid", 1},
    {EwOp::kTanh, "Tanh", 1},
    {EwOp::kErf, "Erf", 1},
    {EwOp::kSqrt, "Sqrt", 1},
    {EwOp::kExp, "Exp", 1},
    {EwOp::kLog, "Log", 1},
    {EwOp::kReciprocal, "Reciprocal", 1},
    {EwOp::kFloor, "Floor", 1},
    {EwOp::kCeil, "Ceil", 1},
};

const OpInfo& Info(EwOp op) {
  for (const OpInfo& i : kOps) {
    if (i.op == op) return i;
  }
  return kOps[0];  // unreachable: every EwOp is listed
}

std::string OperandText(const EwOperand& o) {
  if (o.kind == EwOperand::kInput) return "x" + std::to_string(o.index);
  if (o.kind == EwOperand::kTemp) return "t" + std::to_string(o.index);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(o.value));
  return buf;
}

// A non-negative decimal index, all of `s`.
bool ParseIndex(const std::string& s, int* out) {
  if (s.empty() || s.size() > 4) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

bool EwOpFromName(const std::string& name, EwOp* op) {
  for (const OpInfo& i : kOps) {
    if (name == i.name) {
      *op = i.op;
      return true;
    }
  }
  return false;
}

const char* EwOpName(EwOp op) { return Info(op).name; }
int EwOpArity(EwOp op) { return Info(op).arity; }

std::string ElementwiseProgram::ToString() const {
  std::string s;
  for (const EwInstruction& in : code) {
    if (!s.empty()) s += ';';
    s += EwOpName(in.op);
    for (const EwOperand& o : in.operands) s += ' ' + OperandText(o);
  }
  return s;
}

StatusOr<ElementwiseProgram> ElementwiseProgram::Parse(const std::string& text, int num_inputs) {
  ElementwiseProgram p;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line, ';')) {
    const std::string where = "program op " + std::to_string(p.code.size()) + " ('" + line + "')";
    if (p.code.size() >= static_cast<size_t>(kMaxFusedOps)) {
      return InvalidArgument("program has more than " + std::to_string(kMaxFusedOps) + " ops");
    }
    std::stringstream words(line);
    std::string name, word;
    words >> name;
    EwInstruction in;
    if (!EwOpFromName(name, &in.op)) return InvalidArgument(where + ": unknown op '" + name + "'");
    while (words >> word) {
      EwOperand o;
      if ((word[0] == 'x' || word[0] == 't') && ParseIndex(word.substr(1), &o.index)) {
        o.kind = word[0] == 'x' ? EwOperand::kInput : EwOperand::kTemp;
        if (o.kind == EwOperand::kInput && o.index >= num_inputs) {
          return InvalidArgument(where + ": " + word + " but the node has " + std::to_string(num_inputs) + " inputs");
        }
        if (o.kind == EwOperand::kTemp && o.index >= static_cast<int>(p.code.size())) {
          return InvalidArgument(where + ": " + word + " is not computed before this op");
        }
      } else {
        char* end = nullptr;
        o.kind = EwOperand::kImmediate;
        o.value = std::strtof(word.c_str(), &end);
        if (end != word.c_str() + word.size() || std::isnan(o.value)) {
          return InvalidArgument(where + ": '" + word + "' is not an operand");
        }
      }
      in.operands.push_back(o);
    }
    if (static_cast<int>(in.operands.size()) != EwOpArity(in.op)) {
      return InvalidArgument(where + ": " + name + " takes " + std::to_string(EwOpArity(in.op)) + " operands");
    }
    p.code.push_back(std::move(in));
  }
  if (p.code.empty()) return InvalidArgument("program is empty");
  return p;
}

}  // namespace rankd
