// expect: refused
// The store layer reaching up into the engine: with the store's include
// directory this must not compile.
#include "engine/engine_impl.h"
