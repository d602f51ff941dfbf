// ModePolicy: the decision, interval by interval, between inline and
// deferred deduplication (docs/controller.md).
// Thread-safety: as ModePolicy says.
#pragma once

#include <memory>
#include <string>

#include "control/interval_sample.h"
#include "hiodsfs/control.h"

namespace hiodsfs {

// Decides the write mode from samples. Implementations: HiodsPolicy (the
// baseline, "hiods") and CapacityPolicy ("capacity", the default), which
// remembers the inline capacity and per-request costs it measured and so
// neither flaps on a load between inline's and deferred's capacity nor stays
// deferred when deferring does not make requests cheaper.
// Thread-safety: a policy is used by the controller thread only.
class ModePolicy {
public:
    virtual ~ModePolicy() = default;
    virtual const char* name() const = 0;
    // Returns the mode for the next interval; *reason is a short human
    // sentence when it changes (reason may be null).
    virtual WriteMode decide(const IntervalSample& s, WriteMode current, std::string* reason) = 0;
};
// name: "hiods" or "capacity" (kDefaultPolicy). On an unknown name returns
// null and sets *error to a message listing the known names.
std::unique_ptr<ModePolicy> make_policy(const std::string& name, const ControlConfig& cfg,
                                        std::string* error);

}  // namespace hiodsfs
