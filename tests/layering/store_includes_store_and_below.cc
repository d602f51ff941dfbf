// expect: compiles
// The control case: the store's own headers and those of the layers below
// it compile with the same arguments, so a refusal above is the include's.
#include "chunk/fingerprint.h"
#include "common/units.h"
#include "hiodsfs/segment_store.h"
#include "store/store_dir.h"

int main() { return 0; }
