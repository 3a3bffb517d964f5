#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/kube/kube_client.hpp"

namespace hoist {

/// kured's reboot lock: an annotation on kured's DaemonSet that names the node (or, with kured's `--concurrency`
/// above 1, the nodes) rebooting now. kured takes it before it drains and reboots a node, and its pod on that node
/// gives it back after the boot. hoist takes the same lock before its own reboot (`--kured-lock`), so that it never
/// reboots a node while kured reboots another, and kured reboots none while hoist's node is down
/// (docs/host-actions.md, "kured's lock").
inline constexpr const char* k_kured_lock_annotation = "weave.works/kured-node-lock";

/// One holder of the lock, as kured writes it: {"nodeID":…, "metadata":{"unschedulable":…}, "created":…, "TTL":…}.
struct KuredLockHolder {
  std::string node;
  std::string created;         ///< RFC 3339 (Go's time.Time), as written
  std::int64_t ttl_ns = 0;     ///< Go's time.Duration: 0 never expires
  bool unschedulable = false;  ///< whether the node was cordoned before its reboot: kured uncordons it after if not
};

/// The annotation's value: kured's single form (one holder), or its multiple form ({"maxOwners":N,"locks":[…]}).
struct KuredLockValue {
  std::vector<KuredLockHolder> holders;
  int max_owners = 0;  ///< 0: the single form
};

/// Parses the annotation's value; throws hoist::Failure naming `where` when it is not kured's JSON.
KuredLockValue parse_kured_lock(std::string_view text, std::string_view where);

/// Writes the annotation's value in the form it was read in (the single form when `value.max_owners` is 0).
std::string kured_lock_text(const KuredLockValue& value);

/// Whether a holder's TTL has run out at `now` (never for a TTL of 0, or a `created` that does not parse).
bool kured_lock_expired(const KuredLockHolder& holder, std::chrono::system_clock::time_point now);

/// kured's DaemonSet `namespace_name/name` and the node this run reboots.
class KuredLock {
 public:
  KuredLock(const KubeClient& client, std::string namespace_name, std::string name, std::string node);

  /// What one attempt to take the lock found.
  struct Attempt {
    enum class Result {
      taken,         ///< this node holds it now (taken, or already its own)
      no_daemonset,  ///< no such DaemonSet: no kured to wait for
      held,          ///< held by others: `holders` says by whom
    };
    Result result = Result::taken;
    std::string holders;  ///< "node 'b' since 2026-12-06T10:00:00Z"
  };

  /// One attempt to take the lock for this node, by kured's own rules: a free place taken (the write names the
  /// resourceVersion read, and a conflict reads again), a holder whose TTL ran out counted as gone, the lock already
  /// this node's kept. hoist's holder says the node is unschedulable, so that kured's pod never uncordons after the
  /// boot a node that system-upgrade-controller cordoned. Throws KubeError (`interrupted` once `interrupt` is
  /// raised: a node going down stops a request at once), or hoist::Failure for an annotation that is not kured's.
  [[nodiscard]] Attempt try_take(Deadline deadline, const WakeFlag* interrupt = nullptr) const;

  /// Gives the lock back when this node holds it; true when it did. Throws KubeError.
  bool give_back(Deadline deadline, const WakeFlag* interrupt = nullptr) const;

  /// "DaemonSet kube-system/kured": how messages name it.
  [[nodiscard]] std::string display() const;

 private:
  /// The DaemonSet's resourceVersion and the lock it carries (`annotated` false: none); std::nullopt without the
  /// DaemonSet.
  struct Read {
    std::string resource_version;
    KuredLockValue value;
    bool annotated = false;
  };
  [[nodiscard]] std::optional<Read> read(Deadline deadline, const WakeFlag* interrupt) const;
  /// Writes the annotation (null removes it) on the version read: false when it was written meanwhile (409), to
  /// read again, until the `attempt`s run out (then it throws).
  [[nodiscard]] bool write(const Read& read, const nlohmann::json& annotation, Deadline deadline,
                           const WakeFlag* interrupt, int attempt) const;

  const KubeClient& m_client;
  std::string m_namespace;
  std::string m_name;
  std::string m_node;
};

}  // namespace hoist
