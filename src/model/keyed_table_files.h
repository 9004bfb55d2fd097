// A keyed embedding table's rows as HugeCTR and its Hierarchical Parameter Server save them: a
// folder holding `key`, the keys as little-endian INT64, and `emb_vector`, each key's vector of
// `dim` little-endian FP32 values in the keys' order (docs/embedding.md, "Keyed tables"); or as
// NumPy dumps them (numpy.save): `keys.npy` [keys] and `vectors.npy` [keys, dim] (npy_file.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

struct KeyedTableFiles {
  std::vector<int64_t> keys;
  Tensor vectors;  // FP32 [keys, dim]
};

// Reads DIR/key and DIR/emb_vector (or, where DIR has no `key`, DIR/keys.npy and DIR/vectors.npy:
// keys '<i8', '<u8' or '<i4', vectors '<f4' or '<f8' in C order) for a table of width `dim`.
// Errors name the file: one missing or unreadable, a key file whose size is not a whole number of
// keys, a vector file whose size (or .npy shape) is not keys x dim, a malformed .npy header, an
// element type rankd does not read.
StatusOr<KeyedTableFiles> ReadKeyedTableFiles(const std::string& dir, int64_t dim);

// Writes the two files (tests, and tools that convert a dense table).
Status WriteKeyedTableFiles(const std::string& dir, const std::vector<int64_t>& keys, const Tensor& vectors);

}  // namespace rankd
