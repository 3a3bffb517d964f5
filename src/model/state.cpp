#include "hoist/model/state.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <nlohmann/json.hpp>

#include "hoist/model/component.hpp"
#include "hoist/sys/atomic_file.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"
#include "strict_json.hpp"

namespace hoist {

using nlohmann::json;

namespace {

constexpr std::string_view k_state_file = "state.json";

std::string join(std::string_view dir, std::string_view name) {
  std::string path(dir);
  if (path.empty() || path.back() != '/') {
    path += '/';
  }
  path += name;
  return path;
}

json optional_object(const std::optional<LastResult>& result) {
  if (!result) {
    return nullptr;
  }
  return json{{"command", result->command},
              {"outcome", result->outcome},
              {"version", result->version},
              {"time", result->time},
              {"message", result->message}};
}

json optional_object(const std::optional<PendingReboot>& reboot) {
  if (!reboot) {
    return nullptr;
  }
  return json{{"target", reboot->target}, {"boot_id", reboot->boot_id}, {"requested_at", reboot->requested_at}};
}

json optional_object(const std::optional<RollbackIntent>& intent) {
  if (!intent) {
    return nullptr;
  }
  json object{{"from", intent->from},
              {"to", intent->to},
              {"started_at", intent->started_at},
              {"owed_restarts", intent->owed_restarts}};
  if (!intent->reason.empty()) {
    object["reason"] = intent->reason;
  }
  if (!intent->quarantine) {
    object["quarantine"] = false;  // written only when false: every intent before this field quarantined
  }
  if (!intent->plan.empty() || !intent->plan_hash.empty()) {
    object["plan"] = intent->plan;
    object["plan_hash"] = intent->plan_hash;
  }
  return object;
}

json optional_object(const std::optional<RollbackRecord>& record) {
  if (!record) {
    return nullptr;
  }
  return json{{"from", record->from},
              {"to", record->to},
              {"time", record->time},
              {"plan", record->plan},
              {"plan_hash", record->plan_hash}};
}

json optional_object(const std::optional<SwitchIntent>& intent) {
  if (!intent) {
    return nullptr;
  }
  return json{{"to", intent->to},
              {"started_at", intent->started_at},
              {"owed_restarts", intent->owed_restarts},
              {"owed_health_checks", intent->owed_health_checks}};
}

// Strict field access: a missing or mistyped field is corruption, named.
class Reader {
 public:
  Reader(const json& object, std::string where) : m_object(object), m_where(std::move(where)) {
    if (!m_object.is_object()) {
      fail("expected an object");
    }
  }
  [[nodiscard]] std::string string(const char* key) const {
    const auto it = m_object.find(key);
    if (it == m_object.end() || !it->is_string()) {
      fail(std::string("field '") + key + "' must be a string");
    }
    auto text = it->get<std::string>();
    if (text.find('\0') != std::string::npos) {  // JSON may spell one (\u0000); no name or path of hoist has one
      fail(std::string("field '") + key + "' contains a NUL character");
    }
    return text;
  }
  [[nodiscard]] const json& any(const char* key) const {
    const auto it = m_object.find(key);
    if (it == m_object.end()) {
      fail(std::string("field '") + key + "' is missing");
    }
    return *it;
  }
  [[noreturn]] void fail(const std::string& why) const { throw Failure(m_where + ": " + why); }
  [[nodiscard]] const std::string& where() const { return m_where; }

 private:
  const json& m_object;
  std::string m_where;
};

json optional_object(const std::optional<StagedVersion>& staged) {
  if (!staged) {
    return nullptr;
  }
  return json{{"version", staged->version},
              {"started_at", staged->started_at},
              {"plan", staged->plan},
              {"plan_hash", staged->plan_hash}};
}

json optional_object(const std::optional<HealthRecord>& health) {
  if (!health) {
    return nullptr;
  }
  return json{{"version", health->version},
              {"verdict", health->verdict},
              {"check", health->check},
              {"detail", health->detail},
              {"time", health->time}};
}

LastResult read_last_result(const json& object, const std::string& where) {
  const Reader r(object, where);
  return LastResult{r.string("command"), r.string("outcome"), r.string("version"), r.string("time"),
                    r.string("message")};
}

// An optional list of non-empty strings without control characters (`what` they must be, for the message).
std::vector<std::string> owed_list(const json& document, const Reader& top, const char* key, const char* what) {
  std::vector<std::string> list;
  const auto owed = document.find(key);
  if (owed == document.end()) {
    return list;
  }
  if (!owed->is_array()) {
    top.fail(std::string("field '") + key + "' must be an array");
  }
  for (const json& item : *owed) {
    if (!item.is_string() || item.get<std::string>().empty() || has_control_character(item.get<std::string>())) {
      top.fail(std::string("field '") + key + "' must hold " + what);
    }
    list.push_back(item.get<std::string>());
  }
  return list;
}

}  // namespace

std::string to_json_text(const ComponentState& state) {
  json versions = json::array();
  for (const auto& record : state.versions) {
    versions.push_back({{"version", record.version}, {"installed_at", record.installed_at}});
  }
  json quarantined = json::array();
  for (const auto& record : state.quarantined) {
    quarantined.push_back({{"version", record.version}, {"since", record.since}, {"reason", record.reason}});
  }
  json document{{"schema", k_state_schema},
                {"component", state.component},
                {"kind", state.kind},
                {"destination", state.destination},
                {"version_scheme", state.version_scheme},
                {"current", state.current},
                {"previous", state.previous},
                {"versions", versions},
                {"last_result", optional_object(state.last_result)},
                {"boot_id", state.boot_id},
                {"pending_reboot", optional_object(state.pending_reboot)},
                {"owed_restarts", state.owed_restarts},
                {"rollbacks", state.rollbacks},
                {"rollback", optional_object(state.rollback)},
                {"last_rollback", optional_object(state.last_rollback)},
                {"switching", optional_object(state.switching)},
                {"staged", optional_object(state.staged)},
                {"quarantined", quarantined},
                {"owed_health_checks", state.owed_health_checks},
                {"health", optional_object(state.health)}};
  if (!state.selinux_label.empty()) {
    document["selinux_label"] = state.selinux_label;
  }
  // Written only for a server whose datastore hoist snapshots, so that other states read as before.
  if (!state.datastore_snapshots.empty()) {
    json snapshots = json::array();
    for (const auto& snapshot : state.datastore_snapshots) {
      snapshots.push_back({{"from", snapshot.from},
                           {"to", snapshot.to},
                           {"kind", snapshot.kind},
                           {"path", snapshot.path},
                           {"taken_at", snapshot.taken_at},
                           {"bytes", snapshot.bytes},
                           {"how", snapshot.how}});
      if (snapshot.etcd_members > 0) {
        snapshots.back()["etcd_members"] = snapshot.etcd_members;
      }
    }
    document["datastore_snapshots"] = snapshots;
  }
  if (state.last_change) {
    document["last_change"] = optional_object(state.last_change);
  }
  if (state.kept_for_datastore) {
    document["kept_for_datastore"] = {{"version", state.kept_for_datastore->version},
                                      {"since", state.kept_for_datastore->since},
                                      {"reason", state.kept_for_datastore->reason}};
  }
  return document.dump(2) + "\n";
}

ComponentState parse_state(std::string_view text, std::string_view source) {
  const std::string where = "corrupt state file '" + std::string(source) + "'";
  // Duplicate keys are refused as in a manifest: which of two "current" fields would be the truth?
  auto parsed = parse_strict_json(text);
  if (!parsed) {
    throw Failure(where + ": " + parsed.error().message);
  }
  const json document = std::move(*parsed);
  const Reader top(document, where);
  const json& schema = top.any("schema");
  if (!schema.is_number_integer()) {
    top.fail("field 'schema' must be an integer");
  }
  // Compared as the number it is: get<int>() would wrap a schema of 2^32 or more into range.
  const bool is_unsigned = schema.is_number_unsigned();
  if (is_unsigned ? schema.get<uint64_t>() > static_cast<uint64_t>(k_state_schema)
                  : schema.get<int64_t>() > static_cast<int64_t>(k_state_schema)) {
    throw Failure("state file '" + std::string(source) + "' was written by a newer hoist (schema " + schema.dump() +
                  ", this hoist reads up to " + std::to_string(k_state_schema) + "); refusing to touch it");
  }
  if (!is_unsigned || schema.get<uint64_t>() < 1) {  // a parsed integer is signed only when negative
    top.fail("field 'schema' must be at least 1");
  }
  ComponentState state;
  state.component = top.string("component");
  state.kind = top.string("kind");
  state.destination = top.string("destination");
  state.version_scheme = top.string("version_scheme");
  state.current = top.string("current");
  state.previous = top.string("previous");
  state.boot_id = top.string("boot_id");
  const json& versions = top.any("versions");
  if (!versions.is_array()) {
    top.fail("field 'versions' must be an array");
  }
  for (const json& item : versions) {
    const Reader record(item, where + " in 'versions'");
    state.versions.push_back({record.string("version"), record.string("installed_at")});
  }
  if (const json& result = top.any("last_result"); !result.is_null()) {
    state.last_result = read_last_result(result, where + " in 'last_result'");
  }
  // Written since the last change was kept apart from the last run; a state from before has none.
  if (const auto change = document.find("last_change"); change != document.end() && !change->is_null()) {
    state.last_change = read_last_result(*change, where + " in 'last_change'");
  }
  // Written since owed restarts (and then owed health checks) were recorded; a state from before has none.
  state.owed_restarts = owed_list(document, top, "owed_restarts", "unit names");
  state.owed_health_checks = owed_list(document, top, "owed_health_checks", "health checks");
  if (const auto health = document.find("health"); health != document.end() && !health->is_null()) {
    const Reader r(*health, where + " in 'health'");
    state.health =
        HealthRecord{r.string("version"), r.string("verdict"), r.string("check"), r.string("detail"), r.string("time")};
  }
  // Written since rollbacks were counted; a state from before has counted none.
  if (const auto rollbacks = document.find("rollbacks"); rollbacks != document.end()) {
    if (!rollbacks->is_number_unsigned()) {
      top.fail("field 'rollbacks' must be a non-negative integer");
    }
    state.rollbacks = rollbacks->get<std::uint64_t>();
  }
  // Written since rollbacks record their intent; a state from before has none.
  if (const auto intent = document.find("rollback"); intent != document.end() && !intent->is_null()) {
    const Reader r(*intent, where + " in 'rollback'");
    state.rollback = RollbackIntent{r.string("from"),
                                    r.string("to"),
                                    r.string("started_at"),
                                    owed_list(*intent, r, "owed_restarts", "unit names"),
                                    intent->contains("reason") ? r.string("reason") : std::string(),
                                    true,
                                    intent->contains("plan") ? r.string("plan") : std::string(),
                                    intent->contains("plan_hash") ? r.string("plan_hash") : std::string()};
    // Written only when false, since a switch back may leave its version out of quarantine.
    if (const auto quarantine = intent->find("quarantine"); quarantine != intent->end()) {
      if (!quarantine->is_boolean()) {
        r.fail("field 'quarantine' must be true or false");
      }
      state.rollback->quarantine = quarantine->get<bool>();
    }
  }
  // Written since the last rollback is recorded; a state from before has none.
  if (const auto record = document.find("last_rollback"); record != document.end() && !record->is_null()) {
    const Reader r(*record, where + " in 'last_rollback'");
    state.last_rollback =
        RollbackRecord{r.string("from"), r.string("to"), r.string("time"), r.string("plan"), r.string("plan_hash")};
  }
  // Written since upgrades record their switch before it; a state from before has none.
  if (const auto intent = document.find("switching"); intent != document.end() && !intent->is_null()) {
    const Reader r(*intent, where + " in 'switching'");
    state.switching =
        SwitchIntent{r.string("to"), r.string("started_at"), owed_list(*intent, r, "owed_restarts", "unit names"),
                     owed_list(*intent, r, "owed_health_checks", "health checks")};
  }
  // Written since `hoist stage` stages ahead of the switch; a state from before has none.
  if (const auto staged = document.find("staged"); staged != document.end() && !staged->is_null()) {
    const Reader r(*staged, where + " in 'staged'");
    state.staged = StagedVersion{r.string("version"), r.string("started_at"), r.string("plan"), r.string("plan_hash")};
    // The name of a version's files on the host, which a run may remove: one plain name that is no name of hoist's.
    const std::string& version = state.staged->version;
    bool usable = !version.empty() && version.find('/') == std::string::npos && !has_control_character(version);
    try {
      validate_version_name(version);
    } catch (const UsageError&) {
      usable = false;
    }
    if (!usable) {
      r.fail("field 'version' must be a version's name");
    }
  }
  // Written since rollbacks quarantine what they leave; a state from before has none.
  if (const auto quarantined = document.find("quarantined"); quarantined != document.end()) {
    if (!quarantined->is_array()) {
      top.fail("field 'quarantined' must be an array");
    }
    for (const json& item : *quarantined) {
      const Reader record(item, where + " in 'quarantined'");
      state.quarantined.push_back({record.string("version"), record.string("since"), record.string("reason")});
    }
  }
  // Written only for a file whose replaced file had a label.
  if (const auto label = document.find("selinux_label"); label != document.end()) {
    if (!label->is_string() || label->get<std::string>().empty() || has_control_character(label->get<std::string>())) {
      top.fail("field 'selinux_label' must be an SELinux context");
    }
    state.selinux_label = label->get<std::string>();
  }
  // Written only for a server's datastore (docs/datastore.md).
  if (const auto snapshots = document.find("datastore_snapshots"); snapshots != document.end()) {
    if (!snapshots->is_array()) {
      top.fail("field 'datastore_snapshots' must be an array");
    }
    for (const json& item : *snapshots) {
      const Reader r(item, where + " in 'datastore_snapshots'");
      const json& bytes = r.any("bytes");
      if (!bytes.is_number_unsigned()) {
        r.fail("field 'bytes' must be a non-negative integer");
      }
      const std::string kind = r.string("kind");
      if (kind != "sqlite" && kind != "etcd") {
        r.fail("field 'kind' must be sqlite or etcd");
      }
      int members = 0;
      if (const auto listed = item.find("etcd_members"); listed != item.end()) {
        if (!listed->is_number_unsigned() || listed->get<std::uint64_t>() > 1000) {
          r.fail("field 'etcd_members' must be an integer from 0 to 1000");
        }
        members = static_cast<int>(listed->get<std::uint64_t>());
      }
      state.datastore_snapshots.push_back(DatastoreSnapshot{r.string("from"), r.string("to"), kind, r.string("path"),
                                                            r.string("taken_at"), bytes.get<std::uint64_t>(),
                                                            r.string("how"), members});
    }
  }
  if (const auto kept = document.find("kept_for_datastore"); kept != document.end() && !kept->is_null()) {
    const Reader r(*kept, where + " in 'kept_for_datastore'");
    state.kept_for_datastore = KeptForDatastore{r.string("version"), r.string("since"), r.string("reason")};
  }
  if (const json& reboot = top.any("pending_reboot"); !reboot.is_null()) {
    const Reader r(reboot, where + " in 'pending_reboot'");
    state.pending_reboot = PendingReboot{r.string("target"), r.string("boot_id"), r.string("requested_at")};
  }
  return state;
}

std::string StateStore::component_dir(std::string_view component) const {
  return join(m_state_dir, component);
}

std::vector<std::string> StateStore::components() const {
  std::vector<std::string> names;
  auto dir = m_root.open(m_state_dir, O_RDONLY | O_DIRECTORY);
  if (!dir) {
    if (dir.error().errnum == ENOENT) {
      return names;
    }
    throw Failure(dir.error().message);
  }
  DIR* stream = ::fdopendir(dir->get());
  if (stream == nullptr) {
    throw Failure(system_message("list '" + m_root.display(m_state_dir) + "'", errno));
  }
  const int dirfd = dir->release();
  while (const dirent* entry = ::readdir(stream)) {
    const std::string name = entry->d_name;
    if (name == "." || name == ".." || name.front() == '.') {
      continue;
    }
    // Any state.json counts, whatever its type: load() refuses a symlink, a FIFO or a
    // directory there as corruption, which must be reported, not taken for "nothing installed".
    struct stat st {};
    const std::string state_file = name + "/" + std::string(k_state_file);
    if (::fstatat(dirfd, state_file.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      names.push_back(name);
    }
  }
  ::closedir(stream);
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<ComponentState> StateStore::load(std::string_view component) const {
  validate_component_name(component);
  const std::string path = join(component_dir(component), k_state_file);
  const std::string shown = m_root.display(path);
  // hoist's own file: never followed out of the state directory (O_NOFOLLOW), and a FIFO
  // put there cannot hang the run while it holds the lock (k_read_flags, then read_fd's check).
  auto fd = m_root.open(path, k_read_flags, Follow::no);
  if (!fd) {
    if (fd.error().errnum == ENOENT) {
      return std::nullopt;
    }
    if (fd.error().errnum == ELOOP) {
      throw Failure("failed to read '" + shown + "': it is a symbolic link, not a regular file");
    }
    throw Failure(fd.error().message);
  }
  auto text = read_fd(fd->get(), shown);
  if (!text) {
    throw Failure(text.error().message);
  }
  ComponentState state = parse_state(*text, shown);
  if (state.component != component) {
    throw Failure("corrupt state file '" + shown + "': it names component '" + state.component + "'");
  }
  return state;
}

void StateStore::save(const ComponentState& state) const {
  validate_component_name(state.component);
  const std::string dir = component_dir(state.component);
  auto dirfd = m_root.make_directories(dir, 0755);
  if (!dirfd) {
    throw Failure(dirfd.error().message);
  }
  // O_PATH descriptors cannot be fsynced; reopen the directory for the write.
  auto writable = m_root.open(dir, O_RDONLY | O_DIRECTORY);
  if (!writable) {
    throw Failure(writable.error().message);
  }
  remove_stale_temporaries(writable->get());
  write_file_atomic(writable->get(), std::string(k_state_file), to_json_text(state), 0644,
                    m_root.display(join(dir, k_state_file)))
      .value();
}

std::string now_rfc3339() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

}  // namespace hoist
