#include "backend/cuda/runtime_compiler.h"

#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/settings.h"
#include "common/mutex.h"

namespace rankd::cuda {
namespace {

struct Cache {
  Mutex mu;
  std::map<uint64_t, cudaKernel_t> kernels;
  CompileCounts counts;
};

Cache& TheCache() {
  static Cache* cache = new Cache();  // libraries stay loaded for the life of the process
  return *cache;
}

// 64-bit FNV-1a over a string or a byte vector.
template <typename Bytes>
uint64_t Fnv1a(const Bytes& bytes, uint64_t h = 14695981039346656037ull) {
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

Status NvrtcCheck(nvrtcResult r, const char* what) {
  if (r == NVRTC_SUCCESS) return Status::Ok();
  return Internal(std::string(what) + ": " + nvrtcGetErrorString(r));
}

// CUBIN of `source` for sm_<arch>.
StatusOr<std::vector<char>> Compile(const std::string& source, const std::string& arch) {
  nvrtcProgram program;
  RANKD_RETURN_IF_ERROR(NvrtcCheck(
      nvrtcCreateProgram(&program, source.c_str(), "rankd_generated.cu", 0, nullptr, nullptr), "nvrtcCreateProgram"));
  std::string gpu = "--gpu-architecture=sm_" + arch;
  // No contraction of a * b + c across ops: the fused code rounds as the unfused kernels do.
  const char* options[] = {gpu.c_str(), "-std=c++17", "--fmad=false"};
  nvrtcResult compiled = nvrtcCompileProgram(program, 3, options);
  std::vector<char> cubin;
  Status s = Status::Ok();
  if (compiled != NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtcGetProgramLogSize(program, &size);
    std::string log(size, '\0');
    if (size > 0) nvrtcGetProgramLog(program, log.data());
    while (!log.empty() && log.back() == '\0') log.pop_back();
    s = Internal(std::string("NVRTC could not compile a generated kernel: ") + nvrtcGetErrorString(compiled) + "\n" +
                 log);
  } else {
    size_t size = 0;
    s = NvrtcCheck(nvrtcGetCUBINSize(program, &size), "nvrtcGetCUBINSize");
    if (s.ok()) {
      cubin.resize(size);
      s = NvrtcCheck(nvrtcGetCUBIN(program, cubin.data()), "nvrtcGetCUBIN");
    }
  }
  nvrtcDestroyProgram(&program);
  RANKD_RETURN_IF_ERROR(s);
  return cubin;
}

std::filesystem::path DiskPath(uint64_t hash) {
  const std::string dir = KernelCacheDir();
  if (dir.empty()) return {};
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.cubin", static_cast<unsigned long long>(hash));
  return std::filesystem::path(dir) / name;
}

// A cache file: kMagic, the code's size and its FNV hash (8 bytes each), then the code. The loader
// takes code without a size, so a file is used only when all three check out.
constexpr char kMagic[8] = {'R', 'K', 'C', 'U', 'B', 'I', 'N', '1'};
constexpr size_t kHeader = 24;

// The code in a cache file, or empty when the file is missing, short or damaged.
std::vector<char> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::vector<char> file((std::istreambuf_iterator<char>(in)), {});
  if (file.size() < kHeader || std::memcmp(file.data(), kMagic, 8) != 0) return {};
  uint64_t size = 0, hash = 0;
  std::memcpy(&size, file.data() + 8, 8);
  std::memcpy(&hash, file.data() + 16, 8);
  if (size != file.size() - kHeader) return {};
  std::vector<char> code(file.begin() + kHeader, file.end());
  return Fnv1a(code) == hash ? code : std::vector<char>();
}

// Written beside and renamed, so a concurrent reader never sees half a file. Failures are ignored:
// the disk cache only saves time.
void WriteFile(const std::filesystem::path& path, const std::vector<char>& data) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::filesystem::path tmp = path;
  tmp += ".tmp" + std::to_string(reinterpret_cast<uintptr_t>(&data));
  {
    std::ofstream out(tmp, std::ios::binary);
    const uint64_t size = data.size(), hash = Fnv1a(data);
    out.write(kMagic, 8);
    out.write(reinterpret_cast<const char*>(&size), 8);
    out.write(reinterpret_cast<const char*>(&hash), 8);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) return;
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace

StatusOr<cudaKernel_t> CompileKernel(const std::string& source, const std::string& name) {
  int device = 0, major = 0, minor = 0, nvrtc_major = 0, nvrtc_minor = 0;
  RANKD_CUDA_RETURN(cudaGetDevice(&device));
  RANKD_CUDA_RETURN(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  RANKD_CUDA_RETURN(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  nvrtcVersion(&nvrtc_major, &nvrtc_minor);
  const std::string arch = std::to_string(major * 10 + minor);
  const uint64_t hash =
      Fnv1a(source, Fnv1a(arch + "/" + std::to_string(nvrtc_major) + "." + std::to_string(nvrtc_minor) + "/" + name));
  Cache& cache = TheCache();
  MutexLock lock(cache.mu);
  if (auto it = cache.kernels.find(hash); it != cache.kernels.end()) return it->second;
  auto load = [&](const std::vector<char>& cubin) -> StatusOr<cudaKernel_t> {
    AllCaptureGates gates;  // loading code is not allowed during a capture, on any device
    cudaLibrary_t library;
    cudaKernel_t kernel;
    RANKD_CUDA_RETURN(cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    RANKD_CUDA_RETURN(cudaLibraryGetKernel(&kernel, library, name.c_str()));
    return kernel;
  };
  const std::filesystem::path path = DiskPath(hash);
  std::vector<char> cached = path.empty() ? std::vector<char>() : ReadFile(path);
  StatusOr<cudaKernel_t> kernel = Internal("not compiled");
  if (!cached.empty()) {
    kernel = load(cached);
    if (kernel.ok()) ++cache.counts.from_disk;
    cudaGetLastError();  // code the driver refused: compile afresh
  }
  if (!kernel.ok()) {
    RANKD_ASSIGN_OR_RETURN(std::vector<char> cubin, Compile(source, arch));
    ++cache.counts.compiled;
    RANKD_ASSIGN_OR_RETURN(kernel, load(cubin));
    if (!path.empty()) WriteFile(path, cubin);
  }
  cache.kernels[hash] = *kernel;
  return *kernel;
}

void ForgetLoadedKernels() {
  Cache& cache = TheCache();
  MutexLock lock(cache.mu);
  cache.kernels.clear();
}

CompileCounts RuntimeCompileCounts() {
  Cache& cache = TheCache();
  MutexLock lock(cache.mu);
  return cache.counts;
}

}  // namespace rankd::cuda
