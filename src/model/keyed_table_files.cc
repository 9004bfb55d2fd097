#include "model/keyed_table_files.h"

#include <cstring>
#include <fstream>

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

}  // namespace

StatusOr<KeyedTableFiles> ReadKeyedTableFiles(const std::string& dir, int64_t dim) {
  if (dim < 1) return InvalidArgument("a keyed table needs a width of at least 1, not " + std::to_string(dim));
  const std::string key_path = dir + "/key", vector_path = dir + "/emb_vector";
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
