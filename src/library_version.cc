// librankd.so's own source: its version, which the installed rankd.pc and CMake package also carry.
#include "rankd/engine.h"

namespace rankd {

const char* LibraryVersion() { return RANKD_VERSION; }

}  // namespace rankd
