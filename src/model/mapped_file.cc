#include "model/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "common/mutex.h"

namespace rankd {
namespace {

// The mappings the SIGBUS handler knows, read lock-free from the handler. A slot is free when its
// begin is 0.
struct Slot {
  std::atomic<uintptr_t> begin{0}, end{0};
  std::atomic<bool> faulted{false};
};
constexpr int kSlots = 4096;
Slot g_slots[kSlots];
Mutex g_slots_mu;  // serialises taking and freeing slots
struct sigaction g_previous;

void OnSigbus(int signal, siginfo_t* info, void* context) {
  auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    uintptr_t begin = s.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr >= s.end.load(std::memory_order_acquire)) continue;
    // The file shrank under the mapping: zero pages over all of it, so this read and every later
    // one complete; Check() reports the file changed. mmap is a system call, safe in a handler.
    ::mmap(reinterpret_cast<void*>(begin), s.end.load() - begin, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1,
           0);
    s.faulted.store(true, std::memory_order_release);
    return;
  }
  // Not a mapped table: whoever handled SIGBUS before us, or the default (the fault repeats).
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) {
    g_previous.sa_sigaction(signal, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal);
  } else {
    ::signal(SIGBUS, SIG_DFL);
  }
}

void InstallHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous);
  });
}

int TakeSlot(uintptr_t begin, uintptr_t end) {
  MutexLock lock(g_slots_mu);
  for (int i = 0; i < kSlots; ++i) {
    if (g_slots[i].begin.load() != 0) continue;
    g_slots[i].faulted.store(false);
    g_slots[i].end.store(end, std::memory_order_release);
    g_slots[i].begin.store(begin, std::memory_order_release);
    return i;
  }
  return -1;
}

int64_t MtimeNs(const struct stat& st) { return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec; }

}  // namespace

bool MappedFile::Overlaps(const void* at, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(at), end = begin + bytes;
  MutexLock lock(g_slots_mu);
  for (const Slot& s : g_slots) {
    const uintptr_t b = s.begin.load(std::memory_order_acquire);
    if (b != 0 && begin < s.end.load(std::memory_order_acquire) && b < end) return true;
  }
  return false;
}

StatusOr<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file->fd_ < 0) return NotFound("external data file '" + path + "' cannot be opened");
  struct stat st {};
  if (::fstat(file->fd_, &st) != 0) return NotFound("external data file '" + path + "' cannot be read");
  file->size_ = static_cast<size_t>(st.st_size);
  file->mtime_ns_ = MtimeNs(st);
  if (file->size_ == 0) return file;
  InstallHandler();
  void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, file->fd_, 0);
  if (p == MAP_FAILED) return Internal("mmap of '" + path + "' failed");
  file->data_ = static_cast<const uint8_t*>(p);
  auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto begin = reinterpret_cast<uintptr_t>(p);
  file->slot_ = TakeSlot(begin, begin + (file->size_ + page - 1) / page * page);
  if (file->slot_ < 0) return Unavailable("too many external data files are mapped (" + std::to_string(kSlots) + ")");
  return file;
}

MappedFile::~MappedFile() {
  if (slot_ >= 0) {
    MutexLock lock(g_slots_mu);
    g_slots[slot_].begin.store(0, std::memory_order_release);
  }
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

Status MappedFile::Check() const {
  if (slot_ >= 0 && g_slots[slot_].faulted.load(std::memory_order_acquire)) {
    return Unavailable("external data file '" + path_ + "' was truncated while serving; reload the model");
  }
  struct stat st {};
  if (fd_ >= 0 && (::fstat(fd_, &st) != 0 || static_cast<size_t>(st.st_size) != size_ || MtimeNs(st) != mtime_ns_)) {
    return Unavailable("external data file '" + path_ + "' changed on disk after the model loaded; reload the model");
  }
  return Status::Ok();
}

}  // namespace rankd
