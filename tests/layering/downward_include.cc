// Built against the compile layer's include root: headers of compile/ and the layers below it.
#include "backend/backend.h"
#include "compile/plan.h"
#include "model/graph.h"

int main() { return 0; }
