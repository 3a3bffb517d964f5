#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hoist/kube/kube_client.hpp"
#include "hoist/sys/interrupt.hpp"
#include "hoist/util/backoff.hpp"

namespace hoist {

/// Timing of a ResourceMirror.
struct MirrorTiming {
  int watch_timeout_seconds = 300;  ///< asked of the server for each watch
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{8000};
};

/// A local copy of the objects of one resource that match a query, kept current
/// the way client-go's reflector does: LIST, then WATCH from the list's
/// resourceVersion with bookmarks; when the server ends a watch, watch again from
/// the last resourceVersion seen; when the stream breaks or the server is
/// unreachable, retry with backoff; on 410 Gone, or when the query changes,
/// LIST again. Runs on its own thread from start() until stop() (or the
/// destructor); it never logs (only the owner's thread does): it leaves notes
/// to drain, and a fatal error (403, 401, TLS) to rethrow.
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
  /// `trim` reduces each object to what the owner needs (memory in big clusters).
  ResourceMirror(const KubeClient& client, KubeResource resource, MirrorTiming timing, Deadline deadline,
                 std::function<void()> on_change, std::function<nlohmann::json(nlohmann::json&&)> trim = {});
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

  const KubeClient& m_client;
  const KubeResource m_resource;
  const MirrorTiming m_timing;
  const Deadline m_deadline;
  const std::function<void()> m_on_change;
  const std::function<nlohmann::json(nlohmann::json&&)> m_trim;
  const Interrupt m_interrupt;

  mutable std::mutex m_mutex;  // guards everything below
  ListQuery m_wanted;
  Snapshot m_snapshot;
  std::vector<Note> m_notes;
  std::exception_ptr m_failure;

  std::atomic<bool> m_stop{false};
  std::thread m_thread;
};

}  // namespace hoist
