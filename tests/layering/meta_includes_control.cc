// expect: refused
// meta sits beside control, not above it: meta/history.h once included it.
#include "control/interval_sample.h"
