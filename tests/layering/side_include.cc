// Built against the CPU backend's include root, this must fail: the CUDA backend is beside it.
#include "backend/backend.h"
#include "backend/cuda/device.h"

int main() { return 0; }
