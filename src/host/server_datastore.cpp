// How k3s and RKE2 choose their datastore, read from the host as they read it themselves. The facts, from their
// sources and documentation:
// - k3s's install.sh writes /etc/systemd/system/k3s.service (or k3s-agent.service) with
//   `ExecStart=/usr/local/bin/k3s server ...` (one quoted word a line, continued with backslashes) and
//   `EnvironmentFile=-/etc/systemd/system/k3s.service.env`, where it keeps the K3S_* variables it was given;
//   RKE2's units are rke2-server.service and rke2-agent.service, `ExecStart=/usr/local/bin/rke2 server`.
// - The configuration file (k3s pkg/configfilearg/parser.go): <PRODUCT>_CONFIG_FILE, else --config/-c, else
//   /etc/rancher/<product>/config.yaml, then every *.yaml and *.yml of `<file>.d/` by name; a later value
//   replaces an earlier one, a key ending in `+` appends; the values become flags placed before the command
//   line's, so the command line wins, and flags win over the environment (urfave/cli).
// - --data-dir defaults to /var/lib/rancher/<product> (k3s pkg/cli/cmds/server.go); the server's state is under
//   <data-dir>/server, etcd's snapshots under <data-dir>/server/db/snapshots unless --etcd-snapshot-dir.
// - The datastore (k3s pkg/cluster/managed.go, assignManagedDriver): embedded etcd when etcd was initialized on
//   disk (pkg/etcd/etcd.go IsInitialized: <data-dir>/server/db/etcd/member/wal is a directory), or when
//   --datastore-endpoint is `etcd`, or when none is given and the server initializes (--cluster-init) or joins
//   (--server with a token) a cluster; else kine over --datastore-endpoint when one is given; else kine over
//   SQLite at <data-dir>/server/db/state.db. RKE2 runs embedded etcd unless --disable-etcd without --server
//   (SQLite) or --datastore-endpoint (docs.rke2.io, "Embedded datastore", "External datastore").
// - A server with --disable-etcd that joins another (--server) keeps no datastore: etcd runs on other servers.
#include "hoist/host/server_datastore.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <map>

#include <nlohmann/json.hpp>

#include "hoist/host/systemd_unit.hpp"
#include "hoist/sys/yaml_document.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"

namespace hoist {

namespace {

// The flags that decide the datastore, by their long name, with the short aliases that map to them.
const std::map<std::string, std::string, std::less<>> k_aliases = {
    {"d", "data-dir"}, {"c", "config"}, {"s", "server"}, {"t", "token"}};
// Flags that take no value on the command line (`--cluster-init`, or `--cluster-init=false`).
const char* const k_booleans[] = {"cluster-init", "disable-etcd", "cluster-reset"};

bool is_boolean(const std::string& name) {
  return std::find(std::begin(k_booleans), std::end(k_booleans), name) != std::end(k_booleans);
}

// Go's strconv.ParseBool, as urfave/cli reads a boolean flag's value or its environment variable.
bool parse_go_bool(const std::string& text) {
  return text == "1" || text == "t" || text == "T" || text == "true" || text == "TRUE" || text == "True";
}

std::string canonical_flag(std::string name) {
  const auto alias = k_aliases.find(name);
  return alias == k_aliases.end() ? name : alias->second;
}

// The settings that decide the datastore, each with the value that wins and where it came from.
class Settings {
 public:
  void set(const std::string& name, std::string value, std::string from) {
    m_values[name] = Value{std::move(value), std::move(from)};
  }
  [[nodiscard]] std::string get(const std::string& name) const {
    const auto it = m_values.find(name);
    return it == m_values.end() ? std::string() : it->second.value;
  }
  [[nodiscard]] bool flag(const std::string& name) const {
    const auto it = m_values.find(name);
    return it != m_values.end() && parse_go_bool(it->second.value);
  }
  [[nodiscard]] std::string from(const std::string& name) const {
    const auto it = m_values.find(name);
    return it == m_values.end() ? std::string() : it->second.from;
  }

 private:
  struct Value {
    std::string value;
    std::string from;
  };
  std::map<std::string, Value> m_values;
};

// The flags of a command line (after `server`), in order: name and value ("true" for a bare boolean).
std::vector<std::pair<std::string, std::string>> command_line_flags(const std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') {
      continue;
    }
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    const size_t equals = name.find('=');
    if (equals != std::string::npos) {
      flags.emplace_back(canonical_flag(name.substr(0, equals)), name.substr(equals + 1));
      continue;
    }
    name = canonical_flag(name);
    if (is_boolean(name)) {
      flags.emplace_back(name, "true");
    } else if (i + 1 < args.size()) {
      flags.emplace_back(name, args[++i]);
    }
  }
  return flags;
}

// A YAML value as the flag it becomes: a scalar as written (booleans as true/false), a list's last item.
std::string config_value(const nlohmann::json& value) {
  if (value.is_array()) {
    return value.empty() ? std::string() : config_value(value.back());
  }
  if (!value.is_string()) {
    return std::string();
  }
  const auto text = value.get<std::string>();
  if (yaml_true(text)) {
    return "true";
  }
  if (yaml_false(text)) {
    return "false";
  }
  return text;
}

bool is_directory(const HostRoot& root, const std::string& path) {
  auto fd = root.open(path, O_PATH);
  struct stat st {};
  return fd && ::fstat(fd->get(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> config_dropins(const HostRoot& root, const std::string& file) {
  std::vector<std::string> names;
  const std::string dir = file + ".d";
  auto fd = root.open(dir, O_RDONLY | O_DIRECTORY);
  if (!fd) {
    return names;
  }
  DIR* stream = ::fdopendir(fd->get());
  if (stream == nullptr) {
    return names;
  }
  (void)fd->release();
  while (const dirent* entry = ::readdir(stream)) {
    std::string name = entry->d_name;
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    const bool yaml = (lower.size() > 5 && lower.compare(lower.size() - 5, 5, ".yaml") == 0) ||
                      (lower.size() > 4 && lower.compare(lower.size() - 4, 4, ".yml") == 0);
    if (yaml && entry->d_type != DT_DIR) {
      names.push_back(dir + "/" + name);
    }
  }
  ::closedir(stream);
  std::sort(names.begin(), names.end());
  return names;
}

// Applies the configuration file and its drop-ins to `settings`; returns the files read.
std::vector<std::string> apply_config(const HostRoot& root, const std::string& file, Settings& settings) {
  std::vector<std::string> files;
  auto main = root.open(file, k_read_flags);
  if (main) {
    files.push_back(file);
  } else if (main.error().errnum != ENOENT) {
    throw Failure(main.error().message);
  }
  for (auto& dropin : config_dropins(root, file)) {
    files.push_back(std::move(dropin));
  }
  for (const auto& path : files) {
    auto text = root.read_file(path);
    if (!text) {
      throw Failure(text.error().message);
    }
    auto document = parse_yaml(*text, root.display(path));
    if (!document) {
      throw Failure(document.error().message);
    }
    if (document->is_null()) {
      continue;
    }
    if (!document->is_object()) {
      throw Failure("'" + root.display(path) + "' is not a YAML mapping of settings");
    }
    for (const auto& [key, value] : document->items()) {
      std::string name = key;
      const bool append = !name.empty() && name.back() == '+';
      if (append) {
        name.pop_back();
      }
      name = canonical_flag(name);
      std::string text_value = config_value(value);
      // Appending to a scalar joins with a comma, as k3s's FindString does.
      if (append && !settings.get(name).empty()) {
        text_value = settings.get(name) + "," + text_value;
      }
      settings.set(name, text_value, path);
    }
  }
  return files;
}

std::string env_value(const std::vector<std::string>& environment, const std::string& name) {
  std::string value;
  for (const auto& assignment : environment) {
    if (assignment.size() > name.size() && assignment.compare(0, name.size(), name) == 0 &&
        assignment[name.size()] == '=') {
      value = assignment.substr(name.size() + 1);  // the last assignment wins
    }
  }
  return value;
}

std::string product_of(const std::string& program) {
  const std::string base = program.substr(program.rfind('/') + 1);
  return base.find("rke2") != std::string::npos ? "rke2" : "k3s";
}

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  return text;
}

// The path a sqlite:// datastore-endpoint names (kine's DSN: sqlite://PATH?OPTIONS, PATH possibly file:).
std::string sqlite_path(const std::string& endpoint) {
  std::string path = endpoint.substr(std::string("sqlite://").size());
  path = path.substr(0, path.find('?'));
  if (path.rfind("file:", 0) == 0) {
    path.erase(0, 5);
  }
  return path;
}

// Whether the unit runs `program`: its ExecStart names that path, or one the host resolves to the same file.
bool runs(const HostRoot& root, const ServiceUnit& unit, const std::string& program) {
  if (unit.exec_start.empty()) {
    return false;
  }
  const std::string& executable = unit.exec_start.front();
  if (executable == program) {
    return true;
  }
  auto a = root.resolve(executable, Follow::no);
  auto b = root.resolve(program, Follow::no);
  return a && b && *a == *b;
}

}  // namespace

std::string_view to_string(DatastoreKind kind) noexcept {
  switch (kind) {
    case DatastoreKind::sqlite: return "sqlite";
    case DatastoreKind::etcd: return "etcd";
    case DatastoreKind::external: return "external";
  }
  return "?";
}

std::string endpoint_without_credentials(const std::string& endpoint) {
  const size_t scheme = endpoint.find("://");
  const size_t begin = scheme == std::string::npos ? 0 : scheme + 3;
  const size_t slash = endpoint.find('/', begin);
  const size_t at = endpoint.rfind('@', slash == std::string::npos ? std::string::npos : slash);
  if (at == std::string::npos || at < begin) {
    // mysql's DSN puts the credentials before `@tcp(...)`, without a scheme's `//` host part.
    const size_t tcp = endpoint.find("@tcp(");
    if (tcp != std::string::npos) {
      return endpoint.substr(0, begin) + endpoint.substr(tcp + 1);
    }
    return endpoint;
  }
  return endpoint.substr(0, begin) + endpoint.substr(at + 1);
}

std::optional<ServerDatastore> find_server_datastore(const HostRoot& root, const std::string& program,
                                                     const std::vector<std::string>& units) {
  for (const auto& name : units) {
    const auto unit = read_service_unit(root, name);
    if (!unit || !runs(root, *unit, program)) {
      continue;
    }
    if (unit->exec_start.size() < 2 || unit->exec_start[1] != "server") {
      return std::nullopt;  // an agent: no datastore here
    }
    ServerDatastore server;
    server.product = product_of(program);
    server.unit = name;
    server.program = program;
    server.server_args.assign(unit->exec_start.begin() + 2, unit->exec_start.end());
    server.environment = unit->environment;
    const std::string env_prefix = upper(server.product) + "_";

    Settings settings;
    const std::pair<const char*, const char*> from_env[] = {{"DATASTORE_ENDPOINT", "datastore-endpoint"},
                                                            {"CLUSTER_INIT", "cluster-init"},
                                                            {"URL", "server"},
                                                            {"TOKEN", "token"},
                                                            {"TOKEN_FILE", "token-file"},
                                                            {"DATA_DIR", "data-dir"}};
    for (const auto& [variable, flag] : from_env) {
      const std::string value = env_value(server.environment, env_prefix + variable);
      if (!value.empty()) {
        settings.set(flag, value, "$" + env_prefix + variable);
      }
    }
    const auto flags = command_line_flags(server.server_args);
    std::string config_file = env_value(server.environment, env_prefix + "CONFIG_FILE");
    for (const auto& [flag, value] : flags) {
      if (flag == "config" && config_file.empty()) {
        config_file = value;
      }
    }
    if (config_file.empty()) {
      config_file = "/etc/rancher/" + server.product + "/config.yaml";
    }
    const auto config_files = apply_config(root, config_file, settings);
    for (const auto& [flag, value] : flags) {
      settings.set(flag, value, name + " ExecStart");
    }

    server.data_dir = settings.get("data-dir");
    if (server.data_dir.empty()) {
      server.data_dir = "/var/lib/rancher/" + server.product;
    }
    const std::string db = server.data_dir + "/server/db";
    server.snapshot_dir = settings.get("etcd-snapshot-dir");
    if (server.snapshot_dir.empty()) {
      server.snapshot_dir = db + "/snapshots";
    }
    const std::string endpoint = settings.get("datastore-endpoint");
    const bool joins = !settings.get("server").empty();
    const bool has_token = !settings.get("token").empty() || !settings.get("token-file").empty();
    std::string why;
    auto said = [&settings](const std::string& flag) { return "--" + flag + " (" + settings.from(flag) + ")"; };
    if (is_directory(root, db + "/etcd/member/wal")) {
      server.kind = DatastoreKind::etcd;
      why = "etcd is initialized in " + db + "/etcd";
    } else if (endpoint == "etcd") {
      server.kind = DatastoreKind::etcd;
      why = said("datastore-endpoint") + " is etcd";
    } else if (endpoint.rfind("sqlite://", 0) == 0) {
      server.kind = DatastoreKind::sqlite;
      server.location = sqlite_path(endpoint);
      why = said("datastore-endpoint");
    } else if (!endpoint.empty()) {
      server.kind = DatastoreKind::external;
      server.location = endpoint_without_credentials(endpoint);
      why = said("datastore-endpoint");
    } else if (settings.flag("disable-etcd") && joins) {
      server.kind = DatastoreKind::external;
      server.location = "etcd on the servers of " + settings.get("server");
      why = said("disable-etcd") + " with " + said("server");
    } else if (server.product == "rke2") {
      server.kind = settings.flag("disable-etcd") ? DatastoreKind::sqlite : DatastoreKind::etcd;
      why = settings.flag("disable-etcd") ? said("disable-etcd") : "RKE2's default";
    } else if (settings.flag("cluster-init")) {
      server.kind = DatastoreKind::etcd;
      why = said("cluster-init");
    } else if (joins && has_token) {
      server.kind = DatastoreKind::etcd;
      why = said("server") + " with a token";
    } else {
      server.kind = DatastoreKind::sqlite;
      why = "k3s's default";
    }
    if (server.location.empty()) {
      server.location = server.kind == DatastoreKind::etcd ? db + "/etcd" : db + "/state.db";
    }
    std::string read;
    for (const auto& file : config_files) {
      read += (read.empty() ? "" : ", ") + file;
    }
    server.found = name + " runs '" + program + " server'; " + (read.empty() ? "no configuration file" : read) + "; " +
                   std::string(to_string(server.kind)) + ": " + why;
    return server;
  }
  return std::nullopt;
}

}  // namespace hoist
