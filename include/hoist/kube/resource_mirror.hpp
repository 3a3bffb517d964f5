#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hoist/kube/kube_client.hpp"
#include "hoist/sys/wake_flag.hpp"
#include "hoist/util/backoff.hpp"

namespace hoist {

/// Items asked for in each page of a mirror's LIST: 50 Nodes of 15 KB are a 750 KB body, a few times
/// that as JSON before they are trimmed. Pages of 100 put prepare's peak at 5,000 nodes 8 MiB higher.
inline constexpr std::size_t k_list_page_size = 50;

/// How long after the API server was last unreachable a 401 or 403 is still taken for a server that is
/// starting: a kube-apiserver that has just come back answers requests its RBAC allows with 403 Forbidden
/// (and may answer 401) until its authorizer's and authenticator's caches are filled, seen for 5 s on a real
/// one. Upgrading a k3s server restarts the API server under every agent's waiting prepare step.
inline constexpr std::chrono::seconds k_restart_grace{60};

/// Timing of a ResourceMirror.
struct MirrorTiming {
  int watch_timeout_seconds = 300;  ///< asked of the server for each watch
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{8000};
};

/// A local copy of the objects of one resource that match a query, kept current
/// the way client-go's reflector does: LIST (in pages), then WATCH from the list's
/// resourceVersion with bookmarks; when the server ends a watch, watch again from
/// the last resourceVersion seen; when the stream breaks or the server is
/// unreachable, retry with backoff; on 410 Gone, or when the query changes,
/// LIST again; when a continue token of the LIST expires (410), list from its
/// first page again (see list_pages). A 401 or 403 within k_restart_grace of the server
/// being unreachable is retried like an outage; any other one is fatal. Runs on its own thread from start() until
/// stop() (or the destructor); it never logs (only the owner's thread does): it leaves notes to drain, and a fatal
/// error (403, 401, TLS) to rethrow.
class ResourceMirror {
 public:
  /// What the owner sees: the objects by name, and the query they answer.
  struct Snapshot {
    bool synced = false;  ///< a LIST for `query` has completed
    ListQuery query;
    std::map<std::string, nlohmann::json> objects;
  };
  struct Note {
    enum class Level { debug, info, warning };
    Level level;
    std::string message;
  };

  /// `on_change` is called from the mirror's thread after every change of the
  /// snapshot, note or failure; it must be cheap and must not call back in.
  /// `trim` reduces each object to what the owner needs for the query it answers
  /// (memory in big clusters); it is called from the mirror's thread.
  using Trim = std::function<nlohmann::json(nlohmann::json&& object, const ListQuery& query)>;
  ResourceMirror(const KubeClient& client, KubeResource resource, MirrorTiming timing, Deadline deadline,
                 std::function<void()> on_change, Trim trim = {});
  ResourceMirror(const ResourceMirror&) = delete;
  ResourceMirror& operator=(const ResourceMirror&) = delete;
  ~ResourceMirror();

  /// Starts mirroring for `query` (first call), or switches to another query,
  /// which drops the current watch and lists again.
  void set_query(const ListQuery& query);
  /// Stops the thread and waits for it.
  void stop();

  [[nodiscard]] bool started() const { return m_thread.joinable(); }
  [[nodiscard]] Snapshot snapshot() const;
  /// What changed in the snapshot since the last read_changes().
  struct Changes {
    bool relisted = false;        ///< a LIST replaced every object: read them all
    std::set<std::string> names;  ///< else: the objects added, modified or deleted since
  };
  /// Calls `reader` under the mirror's lock with the snapshot and what changed since the last call, so
  /// that an owner who keeps its own view of thousands of objects copies only the changed ones;
  /// `reader` must be quick and must not call back in.
  void read_changes(const std::function<void(const Snapshot&, const Changes&)>& reader);
  /// Notes left since the last call, oldest first.
  std::vector<Note> take_notes();
  /// The fatal error that ended the mirror, if any.
  [[nodiscard]] std::exception_ptr failure() const;

 private:
  void run();
  /// One LIST and the WATCHes that follow it; returns to list again.
  void list_and_watch(Backoff& backoff);
  void note(Note::Level level, std::string message);
  /// Whether the owner's deadline passed (nothing is retried after it).
  [[nodiscard]] bool expired() const;
  /// Waits out a backoff delay; false when interrupted (stop or a new query).
  bool pause(Backoff& backoff, const std::string& why);
  /// What to note when `error` is to be retried: an outage (which it then records), a 404, a 410 or a
  /// timeout, or a 401 or 403 from a server that was unreachable less than k_restart_grace ago; nullopt
  /// when it is fatal.
  std::optional<std::string> transient(const KubeError& error);

  const KubeClient& m_client;
  const KubeResource m_resource;
  const MirrorTiming m_timing;
  const Deadline m_deadline;
  const std::function<void()> m_on_change;
  const Trim m_trim;
  const WakeFlag m_interrupt;

  mutable std::mutex m_mutex;  // guards everything below
  ListQuery m_wanted;
  Snapshot m_snapshot;
  Changes m_changes;
  std::vector<Note> m_notes;
  std::exception_ptr m_failure;

  // When the server was last unreachable; read and written on the mirror's thread only.
  std::optional<std::chrono::steady_clock::time_point> m_unreachable_at;

  std::atomic<bool> m_stop{false};
  std::thread m_thread;
};

}  // namespace hoist
