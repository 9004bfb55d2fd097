// Built against the compile layer's include root, this must fail: serving/ is above compile/.
#include "compile/plan.h"
#include "serving/model.h"

int main() { return 0; }
