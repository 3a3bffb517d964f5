#pragma once

#include <functional>

#include "hoist/host/server_datastore.hpp"
#include "hoist/run/server_preflight.hpp"
#include "hoist/sys/host_root.hpp"

namespace hoist::cli {

/// DatastoreOptions::etcd_members for a run on `root` (which must outlive it): a k3s or RKE2 server's embedded etcd
/// asked for its members through its client API at https://127.0.0.1:2379, where the server's etcd listens on every
/// server, with the client certificate the server gives its own kube-apiserver for it:
/// `<data-dir>/server/tls/etcd/client.crt` and `client.key`, and `server-ca.crt` for etcd's own certificate.
/// Logs the count; 0, with a warning saying why, when etcd cannot be asked (a server not running, files missing).
std::function<int(const ServerDatastore&)> etcd_member_counter(const HostRoot& root);

/// DatastoreOptions::etcd_health for a run on `root`: the members listed as etcd_member_counter() lists them, then
/// each asked for its status at its first client URL with the same certificate, 5 s each. A member is healthy when
/// it has started (it has a name and a client URL), answers, follows a leader and reports no alarm. Logs each
/// member; `known` false, with a warning saying why, when the list cannot be had.
std::function<EtcdHealth(const ServerDatastore&)> etcd_health_checker(const HostRoot& root);

}  // namespace hoist::cli
