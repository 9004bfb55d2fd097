#include "model/keyed_table_files.h"

#include <cstring>
#include <fstream>

#include "model/npy_file.h"

namespace rankd {
namespace {

StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open " + path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return InvalidArgument("cannot read " + path);
  return bytes;
}

Status WriteWhole(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  return out ? Status::Ok() : InvalidArgument("cannot write " + path);
}

// NumPy's form: DIR/keys.npy, the keys ('<i8', '<u8' read as the same 64 bits, or '<i4') [keys],
// and DIR/vectors.npy ('<f4', or '<f8' rounded to FP32) [keys, dim], both in C order.
StatusOr<KeyedTableFiles> ReadNpyTable(const std::string& dir, int64_t dim) {
  const std::string key_path = dir + "/keys.npy", vector_path = dir + "/vectors.npy";
  KeyedTableFiles files;
  int64_t count = 0;
  {  // the key file's bytes freed before the vectors' are read
    RANKD_ASSIGN_OR_RETURN(std::string key_bytes, ReadWhole(key_path));
    RANKD_ASSIGN_OR_RETURN(NpyArray keys, ParseNpy(key_bytes, key_path));
    if (keys.shape.size() != 1) return InvalidArgument(key_path + " must hold one dimension of keys");
    count = keys.shape[0];
    files.keys.resize(static_cast<size_t>(count));
    if (keys.descr == "<i8" || keys.descr == "<u8") {
      if (count > 0) std::memcpy(files.keys.data(), keys.data.data(), keys.data.size());
    } else if (keys.descr == "<i4") {
      for (int64_t i = 0; i < count; ++i) {
        int32_t k = 0;
        std::memcpy(&k, keys.data.data() + i * 4, 4);
        files.keys[static_cast<size_t>(i)] = k;
      }
    } else {
      return InvalidArgument(key_path + " holds '" + keys.descr + "' keys: rankd reads '<i8', '<u8' or '<i4'");
    }
  }
  RANKD_ASSIGN_OR_RETURN(std::string vector_bytes, ReadWhole(vector_path));
  RANKD_ASSIGN_OR_RETURN(NpyArray vectors, ParseNpy(vector_bytes, vector_path));
  if (vectors.shape != std::vector<int64_t>{count, dim}) {
    std::string shape;
    for (int64_t d : vectors.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    return InvalidArgument(vector_path + " holds vectors of shape (" + shape + "); " + std::to_string(count) +
                           " keys of width " + std::to_string(dim) + " need (" + std::to_string(count) + ", " +
                           std::to_string(dim) + ")");
  }
  files.vectors = Tensor::Empty(DType::kF32, {count, dim});
  auto* out = files.vectors.data<float>();
  if (vectors.descr == "<f4") {
    if (count > 0) std::memcpy(out, vectors.data.data(), vectors.data.size());
  } else if (vectors.descr == "<f8") {
    for (int64_t i = 0; i < count * dim; ++i) {
      double v = 0;
      std::memcpy(&v, vectors.data.data() + i * 8, 8);
      out[i] = static_cast<float>(v);
    }
  } else {
    return InvalidArgument(vector_path + " holds '" + vectors.descr + "' values: rankd reads '<f4' or '<f8'");
  }
  return files;
}

}  // namespace

StatusOr<KeyedTableFiles> ReadKeyedTableFiles(const std::string& dir, int64_t dim) {
  if (dim < 1) return InvalidArgument("a keyed table needs a width of at least 1, not " + std::to_string(dim));
  const std::string key_path = dir + "/key", vector_path = dir + "/emb_vector";
  if (!std::ifstream(key_path) && std::ifstream(dir + "/keys.npy")) return ReadNpyTable(dir, dim);
  RANKD_ASSIGN_OR_RETURN(std::string key_bytes, ReadWhole(key_path));
  if (key_bytes.size() % sizeof(int64_t) != 0) {
    return InvalidArgument(key_path + " holds " + std::to_string(key_bytes.size()) +
                           " bytes, not a whole number of 8-byte keys");
  }
  KeyedTableFiles files;
  const int64_t count = static_cast<int64_t>(key_bytes.size() / sizeof(int64_t));
  files.keys.resize(static_cast<size_t>(count));
  if (count > 0) std::memcpy(files.keys.data(), key_bytes.data(), key_bytes.size());
  key_bytes = {};
  RANKD_ASSIGN_OR_RETURN(std::string vector_bytes, ReadWhole(vector_path));
  const uint64_t expected = static_cast<uint64_t>(count) * static_cast<uint64_t>(dim) * sizeof(float);
  if (vector_bytes.size() != expected) {
    return InvalidArgument(vector_path + " holds " + std::to_string(vector_bytes.size()) + " bytes; " +
                           std::to_string(count) + " keys of " + std::to_string(dim) + " FP32 values need " +
                           std::to_string(expected));
  }
  files.vectors = Tensor::Empty(DType::kF32, {count, dim});
  if (expected > 0) std::memcpy(files.vectors.raw(), vector_bytes.data(), expected);
  return files;
}

Status WriteKeyedTableFiles(const std::string& dir, const std::vector<int64_t>& keys, const Tensor& vectors) {
  if (vectors.dtype() != DType::kF32 || vectors.rank() != 2 || vectors.dim(0) != static_cast<int64_t>(keys.size())) {
    return InvalidArgument("keyed table vectors must be FP32 [keys, dim]");
  }
  RANKD_RETURN_IF_ERROR(WriteWhole(dir + "/key", keys.data(), keys.size() * sizeof(int64_t)));
  return WriteWhole(dir + "/emb_vector", vectors.raw(), vectors.bytes());
}

}  // namespace rankd
