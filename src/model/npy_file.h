// NumPy's .npy files (format versions 1 to 3, as numpy.save writes them): the array's element type,
// shape and bytes, for tables and keys a trainer dumped with NumPy (keyed_table_files.h).
//
// A file is the magic "\x93NUMPY", a major and minor version, the header's length (2 bytes in
// version 1, 4 after), and the header: a Python dict literal with 'descr' (the element type, such
// as '<f4'), 'fortran_order' and 'shape'; then the elements in C order (rankd refuses Fortran
// order rather than transpose).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rankd/status.h"

namespace rankd {

struct NpyArray {
  std::string descr;           // e.g. "<f4", "<i8"
  std::vector<int64_t> shape;  // () for a scalar
  std::string_view data;       // the elements' bytes, C order, within the bytes parsed (not copied)
};

// Parses a whole .npy file's bytes, which must outlive the result (its data views them); errors say
// what is wrong (`what` names the file in them).
StatusOr<NpyArray> ParseNpy(const std::string& bytes, const std::string& what);

}  // namespace rankd
