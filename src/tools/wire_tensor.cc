#include "tools/wire_tensor.h"

#include "frontend/bytes_elements.h"

namespace rankd {

WireTensor ToWire(const InferInput& x) {
  if (x.is_bytes()) return {"BYTES", x.strings.shape, EncodeBytesElements(x.strings)};
  return {DTypeName(x.data.dtype()), x.data.shape(),
          std::string(static_cast<const char*>(x.data.raw()), x.data.bytes())};
}

}  // namespace rankd
