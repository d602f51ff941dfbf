// rados:POOL/STORE: the name of a store whose sealed segments are objects
// of a Ceph pool, as the daemon's mount source, hiodsfs-fsck's argument and
// the tier line of STORE/FORMAT give it; and the connection settings the
// daemon and hiodsfs-fsck share. No librados here: every build parses the
// name, whether or not it can open such a store.
// Thread-safety: plain functions and constants.
#pragma once

#include <string>

namespace hiodsfs {

// "rados:POOL/STORE" -> its pool and store name (1 to 64 of [A-Za-z0-9_.-],
// not starting with '.'); false with a one-line *error otherwise, and
// *pool and *store untouched.
bool parse_rados_source(const std::string& source, std::string* pool, std::string* store,
                        std::string* error);

// Defaults of the daemon's ceph_conf, ceph_id, rados_timeout and
// rados_lease options, which hiodsfs-fsck connects and locks with too.
inline constexpr const char* kDefaultCephConf = "/etc/ceph/ceph.conf";
inline constexpr const char* kDefaultCephId = "admin";
// Bounds connecting and each operation.
inline constexpr unsigned kDefaultRadosTimeoutSeconds = 10;
// How long the store's lock outlives a holder that stopped renewing it.
inline constexpr unsigned kDefaultRadosLeaseSeconds = 60;

}  // namespace hiodsfs
