// expect: compiles
#include "cli/options.h"
#include "fsck/tier_source.h"
#include "stat/report.h"

int main() { return 0; }
