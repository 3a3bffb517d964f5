#include "hoist/kube/plan_waiter.hpp"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

namespace hoist {

namespace {

using Clock = std::chrono::steady_clock;

/// Wakes the waiting thread whenever a mirror changed something.
class ChangeSignal {
 public:
  void notify() {
    {
      const std::lock_guard lock(m_mutex);
      ++m_generation;
    }
    m_changed.notify_all();
  }
  /// Waits for a change after `seen` or the deadline; returns the generation now.
  std::uint64_t wait(std::uint64_t seen, Clock::time_point deadline) {
    std::unique_lock lock(m_mutex);
    m_changed.wait_until(lock, deadline, [&] { return m_generation != seen; });
    return m_generation;
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::uint64_t m_generation = 0;
};

/// Logs a mirror's notes; a warning that repeats the previous one (the same
/// server down for minutes) goes to debug so the log stays readable.
void log_notes(ResourceMirror& mirror, std::string& last_warning) {
  for (auto& note : mirror.take_notes()) {
    switch (note.level) {
      case ResourceMirror::Note::Level::debug: spdlog::debug("{}", note.message); break;
      case ResourceMirror::Note::Level::info: spdlog::info("{}", note.message); break;
      case ResourceMirror::Note::Level::warning: {
        // The retry delay differs each time; compare what failed, not when.
        const std::string what = note.message.substr(0, note.message.rfind("; retrying in"));
        if (what == last_warning) {
          spdlog::debug("{}", note.message);
        } else {
          spdlog::warn("{}", note.message);
          last_warning = what;
        }
        break;
      }
    }
  }
}

std::string timeout_message(const PlanWaitOptions& options, const std::optional<PlanProgress>& progress,
                            const std::string& last_warning) {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(options.timeout).count();
  std::string message = "timed out after " + std::to_string(seconds) + " s waiting for plan '" + options.plan +
                        "' in namespace '" + options.namespace_ + "'";
  if (!progress) {
    message += ": the Plan could not be read from the API server";
  } else if (progress->state == PlanProgress::State::waiting && !progress->pending.empty()) {
    message += ": nodes not done: " + join_names(progress->pending);
    if (!progress->applying.empty()) {
      message += " (applying: " + join_names(progress->applying) + ")";
    }
  } else if (progress->state == PlanProgress::State::waiting) {
    message += ": every node is labeled, but system-upgrade-controller still lists as applying: " +
               join_names(progress->applying);
  } else {
    message += ": " + progress->summary(options.plan);
  }
  if (!last_warning.empty()) {
    message += "; last error: " + last_warning;
  }
  return message;
}

}  // namespace

PlanProgress wait_for_plan(const KubeClient& client, const PlanWaitOptions& options) {
  const auto deadline = Clock::now() + options.timeout;
  ChangeSignal signal;
  auto notify = [&signal] { signal.notify(); };

  // One Plan by name: a field selector keeps the list and watch to that object,
  // and unlike GET a LIST answers "not there (yet)" with a resourceVersion to
  // watch from for its creation.
  ResourceMirror plans(client, KubeResource::plans(options.namespace_), options.timing, deadline, notify);
  // A node is kept with only the labels its query's selector and the Plan's label read: the keys are
  // noted here before the query is set, and looked up on the mirror's thread.
  std::mutex keys_mutex;
  std::map<std::string, std::set<std::string>> label_keys;  // by the query's labelSelector
  const auto trim = [&](nlohmann::json&& node, const ListQuery& query) {
    const std::lock_guard lock(keys_mutex);
    const auto keys = label_keys.find(query.label_selector);
    return trim_node(std::move(node), keys == label_keys.end() ? nullptr : &keys->second);
  };
  ResourceMirror nodes(client, KubeResource::nodes(), options.timing, deadline, notify, trim);
  plans.set_query(ListQuery{"", "metadata.name=" + options.plan});

  // The nodes as evaluate_plan() reads them, kept in step with the mirror through its changes: copying
  // only what changed keeps the mirror's lock short while thousands of nodes change.
  NodeMap node_views;
  std::optional<PlanProgress> progress;
  std::string last_summary;
  std::string last_warning;
  std::uint64_t seen = 0;
  for (;;) {
    log_notes(plans, last_warning);
    log_notes(nodes, last_warning);
    for (const auto* mirror : {&plans, &nodes}) {
      if (auto failure = mirror->failure()) {
        std::rethrow_exception(failure);  // the mirrors stop in their destructors
      }
    }

    const auto plan_snapshot = plans.snapshot();
    if (plan_snapshot.synced) {
      const auto found = plan_snapshot.objects.find(options.plan);
      const nlohmann::json* plan = found == plan_snapshot.objects.end() ? nullptr : &found->second;
      PlanProgress current = evaluate_plan(options.plan, plan, {}, options.node_version);
      if (current.state == PlanProgress::State::failed) {
        // SUC has given up on a Job of the Plan: its nodes will not be done within this wait.
        throw Failure("plan '" + options.plan + "' in namespace '" + options.namespace_ +
                      "' has failed: system-upgrade-controller says: " + current.detail);
      }
      bool known = true;
      if (current.selector && !current.selector->selects_nothing()) {
        // Only the nodes the Plan selects are listed and watched: the server
        // filters, so a big cluster's unrelated nodes cost nothing.
        const ListQuery wanted{*current.selector->to_query(), ""};
        {
          const std::lock_guard lock(keys_mutex);
          label_keys.try_emplace(wanted.label_selector, node_label_keys(*current.selector, options.plan));
        }
        nodes.set_query(wanted);
        nodes.read_changes([&](const ResourceMirror::Snapshot& node_snapshot, const ResourceMirror::Changes& changes) {
          known = node_snapshot.synced && node_snapshot.query == wanted;
          if (changes.relisted) {
            node_views.clear();
            for (const auto& [name, object] : node_snapshot.objects) {
              node_views.emplace(name, NodeView::from_json(object));
            }
          }
          for (const auto& name : changes.names) {
            if (const auto object = node_snapshot.objects.find(name); object != node_snapshot.objects.end()) {
              node_views.insert_or_assign(name, NodeView::from_json(object->second));
            } else {
              node_views.erase(name);
            }
          }
        });
        if (known) {
          current = evaluate_plan(options.plan, plan, node_views, options.node_version);
        }
      }
      if (known) {
        progress = std::move(current);
        if (const std::string summary = progress->summary(options.plan); summary != last_summary) {
          spdlog::info("{}", summary);
          last_summary = summary;
        }
        if (progress->complete()) {
          return *progress;
        }
      }
    }

    if (Clock::now() >= deadline) {
      throw Failure(timeout_message(options, progress, last_warning));
    }
    seen = signal.wait(seen, deadline);
  }
}

}  // namespace hoist
