// The cores this process may run on: its CPU affinity (taskset, a container's cpuset), not the
// machine's count that std::thread::hardware_concurrency gives. A server pinned to 8 of 32 cores
// that sized its pools by 32 would run four spinning helpers to a core.
#pragma once

namespace rankd {

// The CPUs in the calling thread's affinity mask (at least 1); the machine's count where the mask
// cannot be read.
int UsableCores();

}  // namespace rankd
