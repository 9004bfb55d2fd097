// A request's input as the binary extension, gRPC's raw contents and shared memory carry it: its
// datatype, shape and bytes (a BYTES input's strings each behind a 4-byte length).
#pragma once

#include <string>

#include "rankd/request.h"

namespace rankd {

struct WireTensor {
  std::string datatype;
  Shape shape;
  std::string bytes;
};

WireTensor ToWire(const InferInput& x);

}  // namespace rankd
