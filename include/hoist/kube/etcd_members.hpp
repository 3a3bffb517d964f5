#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/sys/tls_context.hpp"
#include "hoist/sys/tls_stream.hpp"

namespace hoist {

/// One member of an etcd cluster as its client API lists it.
struct EtcdMember {
  std::string id;    ///< the member ID, as the JSON gateway spells the uint64 (decimal)
  std::string name;  ///< empty for a member added but not started yet
  bool learner = false;
  std::vector<std::string> client_urls;  ///< where its clients reach it (`https://10.0.0.1:2379`); none if not started
};

/// What one member says of itself through etcd's `POST /v3/maintenance/status`.
struct EtcdStatus {
  std::string member_id;            ///< the member that answered (its header's member_id)
  std::string version;              ///< its etcd version (`3.5.13`)
  std::string leader;               ///< the leader it follows; "0" or empty: it has none
  std::vector<std::string> errors;  ///< what it reports wrong: alarms (`NOSPACE`, `CORRUPT`), no leader
};

/// The members in the body of etcd's `POST /v3/cluster/member/list` (its gRPC gateway's JSON), in its order.
/// Throws hoist::Failure, naming `source`, for a body that is not that: not JSON, or no `members` array of objects.
std::vector<EtcdMember> parse_etcd_member_list(std::string_view body, const std::string& source);

/// The members of the etcd cluster that the member at `host`:`port` belongs to, asked through its client API over
/// TLS (a k3s or RKE2 server's own etcd wants the client certificate the server keeps for it, in `tls`). One
/// request, bounded by `deadline`. Throws hoist::Failure naming the endpoint when it cannot be reached, refuses the
/// request or answers something else than a member list.
std::vector<EtcdMember> list_etcd_members(const TlsContext& tls, const std::string& host, std::uint16_t port,
                                          Deadline deadline);

/// The body of etcd's `POST /v3/maintenance/status`. Throws hoist::Failure, naming `source`, for a body that is
/// not a JSON object with a version.
EtcdStatus parse_etcd_status(std::string_view body, const std::string& source);

/// The status of the member whose client URL is `url` (`https://host:port`), asked over TLS as
/// list_etcd_members() asks. Throws hoist::Failure naming the URL when it cannot be reached or answers something
/// else than a status.
EtcdStatus etcd_member_status(const TlsContext& tls, const std::string& url, Deadline deadline);

}  // namespace hoist
