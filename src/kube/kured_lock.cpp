#include "hoist/kube/kured_lock.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "hoist/model/state.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

using nlohmann::ordered_json;

// kured retries a conflicting write at once; so does hoist, as often as this.
constexpr int k_conflict_attempts = 10;

KubeResource daemonsets(const std::string& namespace_name) {
  return {"apps", "v1", "daemonsets", namespace_name};
}

KuredLockHolder read_holder(const nlohmann::json& object, const std::string& where) {
  if (!object.is_object() || !object.contains("nodeID") || !object["nodeID"].is_string() ||
      object["nodeID"].get_ref<const std::string&>().empty()) {
    throw Failure(where + ": a lock without its nodeID");
  }
  KuredLockHolder holder;
  holder.node = object["nodeID"].get<std::string>();
  if (const auto created = object.find("created"); created != object.end() && created->is_string()) {
    holder.created = created->get<std::string>();
  }
  if (const auto ttl = object.find("TTL"); ttl != object.end() && ttl->is_number_integer()) {
    holder.ttl_ns = ttl->get<std::int64_t>();
  }
  if (const auto metadata = object.find("metadata"); metadata != object.end() && metadata->is_object()) {
    if (const auto unschedulable = metadata->find("unschedulable");
        unschedulable != metadata->end() && unschedulable->is_boolean()) {
      holder.unschedulable = unschedulable->get<bool>();
    }
  }
  return holder;
}

ordered_json holder_json(const KuredLockHolder& holder) {
  return ordered_json{{"nodeID", holder.node},
                      {"metadata", {{"unschedulable", holder.unschedulable}}},
                      {"created", holder.created},
                      {"TTL", holder.ttl_ns}};
}

// Go's RFC 3339 (time.Time's JSON): "2026-12-06T10:00:00Z", with a fraction and an offset when it has them.
std::optional<std::chrono::system_clock::time_point> parse_go_time(const std::string& text) {
  std::tm parts{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &parts.tm_year, &parts.tm_mon, &parts.tm_mday,
                  &parts.tm_hour, &parts.tm_min, &parts.tm_sec, &consumed) != 6 ||
      consumed != 19) {
    return std::nullopt;
  }
  std::string_view rest = std::string_view(text).substr(19);
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    while (!rest.empty() && rest.front() >= '0' && rest.front() <= '9') {
      rest.remove_prefix(1);
    }
  }
  long offset = 0;
  if (rest == "Z") {
    offset = 0;
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':') {
    int hours = 0;
    int minutes = 0;
    if (std::sscanf(std::string(rest.substr(1)).c_str(), "%2d:%2d", &hours, &minutes) != 2) {
      return std::nullopt;
    }
    offset = (rest[0] == '+' ? 1 : -1) * (hours * 3600L + minutes * 60L);
  } else {
    return std::nullopt;
  }
  parts.tm_year -= 1900;
  parts.tm_mon -= 1;
  const std::time_t utc = ::timegm(&parts);
  return std::chrono::system_clock::from_time_t(utc - offset);
}

std::string describe(const std::vector<KuredLockHolder>& holders) {
  std::string text;
  for (const auto& holder : holders) {
    text += (text.empty() ? "" : ", ") + std::string("node '") + escaped(holder.node) + "'" +
            (holder.created.empty() ? "" : " since " + escaped(holder.created));
  }
  return text;
}

}  // namespace

KuredLockValue parse_kured_lock(std::string_view text, std::string_view where_view) {
  const std::string where(where_view);
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Failure(where + ": not kured's lock (" + e.what() + ")");
  }
  KuredLockValue value;
  if (document.is_object() && document.contains("locks")) {
    const auto& locks = document["locks"];
    const auto owners = document.find("maxOwners");
    if (!locks.is_array() && !locks.is_null()) {
      throw Failure(where + ": its locks are not a list");
    }
    if (owners == document.end() || !owners->is_number_integer() || owners->get<std::int64_t>() < 1 ||
        owners->get<std::int64_t>() > 1000) {
      throw Failure(where + ": a list of locks without its maxOwners");
    }
    value.max_owners = owners->get<int>();
    if (locks.is_array()) {
      for (const auto& lock : locks) {
        value.holders.push_back(read_holder(lock, where));
      }
    }
    return value;
  }
  value.holders.push_back(read_holder(document, where));
  return value;
}

std::string kured_lock_text(const KuredLockValue& value) {
  if (value.max_owners == 0) {
    return value.holders.empty() ? std::string() : holder_json(value.holders.front()).dump();
  }
  ordered_json locks = ordered_json::array();
  for (const auto& holder : value.holders) {
    locks.push_back(holder_json(holder));
  }
  return ordered_json{{"maxOwners", value.max_owners}, {"locks", locks}}.dump();
}

bool kured_lock_expired(const KuredLockHolder& holder, std::chrono::system_clock::time_point now) {
  if (holder.ttl_ns <= 0) {
    return false;
  }
  const auto created = parse_go_time(holder.created);
  return created && now - *created >= std::chrono::nanoseconds(holder.ttl_ns);
}

KuredLock::KuredLock(const KubeClient& client, std::string namespace_name, std::string name, std::string node)
    : m_client(client), m_namespace(std::move(namespace_name)), m_name(std::move(name)), m_node(std::move(node)) {}

std::string KuredLock::display() const {
  return "DaemonSet " + m_namespace + "/" + m_name;
}

std::optional<KuredLock::Read> KuredLock::read(Deadline deadline, const WakeFlag* interrupt) const {
  nlohmann::json daemonset;
  try {
    daemonset = m_client.get(daemonsets(m_namespace), m_name, deadline, interrupt);
  } catch (const KubeError& e) {
    if (e.kind() == KubeError::Kind::not_found) {
      return std::nullopt;
    }
    throw;
  }
  const auto metadata = daemonset.value("metadata", nlohmann::json::object());
  const auto annotations = metadata.value("annotations", nlohmann::json::object());
  Read found{metadata.value("resourceVersion", ""), {}, false};
  if (const auto text = annotations.find(k_kured_lock_annotation);
      text != annotations.end() && text->is_string() && !text->get_ref<const std::string&>().empty()) {
    found.value =
        parse_kured_lock(text->get<std::string>(), display() + "'s annotation " + std::string(k_kured_lock_annotation));
    found.annotated = true;
  }
  return found;
}

bool KuredLock::write(const Read& read, const nlohmann::json& annotation, Deadline deadline, const WakeFlag* interrupt,
                      int attempt) const {
  const nlohmann::json patch{
      {"metadata",
       {{"resourceVersion", read.resource_version}, {"annotations", {{k_kured_lock_annotation, annotation}}}}}};
  try {
    m_client.patch(daemonsets(m_namespace), m_name, patch, deadline, interrupt);
    return true;
  } catch (const KubeError& e) {
    if (e.status() != 409 || attempt >= k_conflict_attempts) {
      throw;
    }
    return false;  // written meanwhile: read again
  }
}

KuredLock::Attempt KuredLock::try_take(Deadline deadline, const WakeFlag* interrupt) const {
  for (int attempt = 1;; ++attempt) {
    auto found = read(deadline, interrupt);
    if (!found) {
      return {Attempt::Result::no_daemonset, ""};
    }
    KuredLockValue& value = found->value;
    const auto now = std::chrono::system_clock::now();
    std::erase_if(value.holders, [&](const KuredLockHolder& h) { return kured_lock_expired(h, now); });
    if (std::any_of(value.holders.begin(), value.holders.end(),
                    [&](const KuredLockHolder& h) { return h.node == m_node; })) {
      return {Attempt::Result::taken, ""};
    }
    const auto places = static_cast<std::size_t>(value.max_owners == 0 ? 1 : value.max_owners);
    if (value.holders.size() >= places) {
      return {Attempt::Result::held, describe(value.holders)};
    }
    value.holders.push_back(KuredLockHolder{m_node, now_rfc3339(), 0, true});
    if (write(*found, kured_lock_text(value), deadline, interrupt, attempt)) {
      return {Attempt::Result::taken, ""};
    }
  }
}

bool KuredLock::give_back(Deadline deadline, const WakeFlag* interrupt) const {
  for (int attempt = 1;; ++attempt) {
    auto found = read(deadline, interrupt);
    if (!found || !found->annotated) {
      return false;
    }
    KuredLockValue& value = found->value;
    const auto before = value.holders.size();
    std::erase_if(value.holders, [&](const KuredLockHolder& h) { return h.node == m_node; });
    if (value.holders.size() == before) {
      return false;  // another node's, or given back already (kured's pod on this node does it after the boot)
    }
    // The single form goes away with its holder, as kured's release deletes the annotation.
    const nlohmann::json annotation =
        value.max_owners == 0 ? nlohmann::json(nullptr) : nlohmann::json(kured_lock_text(value));
    if (write(*found, annotation, deadline, interrupt, attempt)) {
      return true;
    }
  }
}

}  // namespace hoist
