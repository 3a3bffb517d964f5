#include "hoist/kube/resource_mirror.hpp"

#include <fmt/format.h>

#include "hoist/kube/list_pager.hpp"

namespace hoist {

namespace {

std::string seconds_text(std::chrono::milliseconds delay) {
  return fmt::format("{:.1f} s", static_cast<double>(delay.count()) / 1000.0);
}

std::string resource_version_of(const nlohmann::json& object) {
  if (!object.is_object()) {
    return {};
  }
  if (const auto metadata = object.find("metadata"); metadata != object.end() && metadata->is_object()) {
    if (const auto version = metadata->find("resourceVersion"); version != metadata->end() && version->is_string()) {
      return version->get<std::string>();
    }
  }
  return {};
}

std::string name_of(const nlohmann::json& object) {
  if (!object.is_object()) {
    return {};
  }
  if (const auto metadata = object.find("metadata"); metadata != object.end() && metadata->is_object()) {
    if (const auto name = metadata->find("name"); name != metadata->end() && name->is_string()) {
      return name->get<std::string>();
    }
  }
  return {};
}

}  // namespace

ResourceMirror::ResourceMirror(const KubeClient& client, KubeResource resource, MirrorTiming timing, Deadline deadline,
                               std::function<void()> on_change, Trim trim)
    : m_client(client),
      m_resource(std::move(resource)),
      m_timing(timing),
      m_deadline(deadline),
      m_on_change(std::move(on_change)),
      m_trim(std::move(trim)),
      m_interrupt(WakeFlag::create().value()) {}

ResourceMirror::~ResourceMirror() {
  stop();
}

void ResourceMirror::set_query(const ListQuery& query) {
  {
    const std::lock_guard lock(m_mutex);
    if (m_thread.joinable() && query == m_wanted) {
      return;
    }
    m_wanted = query;
  }
  if (m_thread.joinable()) {
    m_interrupt.raise();  // drop the current watch; run() lists again for the new query
  } else {
    m_thread = std::thread([this] { run(); });
  }
}

void ResourceMirror::stop() {
  m_stop = true;
  m_interrupt.raise();
  if (m_thread.joinable()) {
    m_thread.join();
  }
}

ResourceMirror::Snapshot ResourceMirror::snapshot() const {
  const std::lock_guard lock(m_mutex);
  return m_snapshot;
}

void ResourceMirror::read_changes(const std::function<void(const Snapshot&, const Changes&)>& reader) {
  const std::lock_guard lock(m_mutex);
  reader(m_snapshot, m_changes);
  m_changes = Changes{};
}

std::vector<ResourceMirror::Note> ResourceMirror::take_notes() {
  const std::lock_guard lock(m_mutex);
  return std::exchange(m_notes, {});
}

std::exception_ptr ResourceMirror::failure() const {
  const std::lock_guard lock(m_mutex);
  return m_failure;
}

void ResourceMirror::note(Note::Level level, std::string message) {
  {
    const std::lock_guard lock(m_mutex);
    m_notes.push_back(Note{level, std::move(message)});
  }
  m_on_change();
}

bool ResourceMirror::pause(Backoff& backoff, const std::string& why) {
  const auto delay = backoff.next();
  note(Note::Level::warning, why + "; retrying in " + seconds_text(delay));
  return !m_interrupt.wait_for(delay);
}

std::optional<std::string> ResourceMirror::transient(const KubeError& error) {
  using Kind = KubeError::Kind;
  const auto now = std::chrono::steady_clock::now();
  if (error.kind() == Kind::unreachable || error.kind() == Kind::bad_response) {
    m_unreachable_at = now;  // a stream cut mid-response is how a restarting server looks too
  }
  if (error.retryable() || error.kind() == Kind::timeout || error.kind() == Kind::gone) {
    return error.what();
  }
  if ((error.kind() == Kind::unauthorized || error.kind() == Kind::forbidden) && m_unreachable_at &&
      now - *m_unreachable_at < k_restart_grace) {
    const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(now - *m_unreachable_at);
    return std::string(error.what()) + " (the server was unreachable " + seconds_text(ago) +
           " ago: taken for a server still starting)";
  }
  return std::nullopt;
}

bool ResourceMirror::expired() const {
  return std::chrono::steady_clock::now() >= m_deadline;
}

void ResourceMirror::run() {
  Backoff backoff(m_timing.initial_backoff, m_timing.max_backoff);
  while (!m_stop && !expired()) {
    try {
      list_and_watch(backoff);
    } catch (const KubeError& error) {
      if (error.kind() == KubeError::Kind::interrupted || m_stop || expired()) {
        continue;  // stop, a new query, or the owner's deadline passed: the loop decides
      }
      // A 410 here is a LIST whose continue tokens kept expiring: list again, after a pause.
      if (const auto why = transient(error)) {
        pause(backoff, *why);  // interrupted or not, the loop decides what comes next
        continue;
      }
      const std::lock_guard lock(m_mutex);
      m_failure = std::current_exception();
    } catch (...) {
      const std::lock_guard lock(m_mutex);
      m_failure = std::current_exception();
    }
    if (m_failure) {
      m_on_change();
      return;
    }
  }
}

void ResourceMirror::list_and_watch(Backoff& backoff) {
  // Clear before reading the query: a set_query() after this point raises it
  // again and is not lost.
  m_interrupt.clear();
  ListQuery query;
  {
    const std::lock_guard lock(m_mutex);
    query = m_wanted;
  }
  if (m_stop) {
    return;
  }
  // In pages, each trimmed as it arrives: a whole list of big objects (5,000 Nodes of 15 KB) would be
  // held twice over, as its body and as its JSON, before a single one was trimmed.
  std::map<std::string, nlohmann::json> objects;
  std::string version = list_pages(
      [&](const std::string& token) {
        return m_client.list(m_resource, query, m_deadline, &m_interrupt, ListPage{k_list_page_size, token});
      },
      [&](std::vector<nlohmann::json>&& items) {
        for (auto& item : items) {
          std::string name = name_of(item);
          objects.insert_or_assign(std::move(name), m_trim ? m_trim(std::move(item), query) : std::move(item));
          item = nullptr;  // the full object goes now, not with the whole page
        }
      },
      [&](const KubeError& expired) {
        objects.clear();
        note(Note::Level::info, std::string(expired.what()) + "; listing again from the first page");
      },
      "failed to list " + m_resource.display());
  {
    const std::lock_guard lock(m_mutex);
    m_snapshot = Snapshot{true, query, std::move(objects)};
    m_changes = Changes{true, {}};
  }
  m_on_change();
  backoff.reset();

  while (!m_stop) {
    try {
      m_client.watch(m_resource, query, version, m_timing.watch_timeout_seconds, m_deadline, &m_interrupt,
                     [&](WatchEvent&& event) {
                       if (const auto seen = resource_version_of(event.object); !seen.empty()) {
                         version = seen;
                       }
                       if (event.type == WatchEvent::Type::bookmark) {
                         return;  // only moves the resourceVersion on
                       }
                       std::string name = name_of(event.object);
                       {
                         const std::lock_guard lock(m_mutex);
                         if (!m_changes.relisted) {
                           m_changes.names.insert(name);
                         }
                         if (event.type == WatchEvent::Type::deleted) {
                           m_snapshot.objects.erase(name);
                         } else {
                           m_snapshot.objects[std::move(name)] =
                               m_trim ? m_trim(std::move(event.object), query) : std::move(event.object);
                         }
                       }
                       m_on_change();
                       backoff.reset();
                     });
      note(Note::Level::debug, "the server ended the watch of " + m_resource.display() + "; watching again");
    } catch (const KubeError& error) {
      if (error.kind() == KubeError::Kind::gone) {
        note(Note::Level::info,
             "resourceVersion " + version + " of " + m_resource.display() + " is too old (410 Gone); listing again");
        return;
      }
      if (expired()) {
        return;  // the owner reports its timeout; a retry note now would only be noise
      }
      const auto why = transient(error);
      if (!why) {
        throw;
      }
      // The stream broke, or a server that has just come back refused us: watch again from the last
      // resourceVersion seen, which loses no event; a 410 on that watch sends us back to LIST.
      if (!pause(backoff, *why)) {
        return;
      }
    }
  }
}

}  // namespace hoist
