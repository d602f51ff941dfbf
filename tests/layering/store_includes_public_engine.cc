// expect: refused
// The engine's public header is above the store too.
#include "hiodsfs/engine.h"
