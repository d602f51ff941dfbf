#include "common/thread_name.h"

#include <pthread.h>

#include <cstring>

namespace hiodsfs {

void name_this_thread(const char* name) {
    char cut[16];
    std::strncpy(cut, name, sizeof cut - 1);
    cut[sizeof cut - 1] = '\0';
    (void)::pthread_setname_np(::pthread_self(), cut);  // only a label: a failure changes nothing
}

}  // namespace hiodsfs
