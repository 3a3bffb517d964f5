#include "hoist/model/suc_context.hpp"

#include <sys/stat.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "hoist/util/error.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace hoist {

namespace {

std::string get(const Environment& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

bool directory_exists(const std::filesystem::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::map<std::string, std::string> read_downward_api(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    return {};
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_downward_api(text.str(), path.string());
}

// Undoes Go's strconv.Quote for the escapes it produces in label values.
std::string unquote(std::string_view quoted, const std::string& where) {
  if (quoted.size() < 2 || quoted.front() != '"' || quoted.back() != '"') {
    throw UsageError(where + ": expected a double-quoted value");
  }
  quoted = quoted.substr(1, quoted.size() - 2);
  std::string out;
  for (size_t i = 0; i < quoted.size(); ++i) {
    const char c = quoted[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i >= quoted.size()) {
      throw UsageError(where + ": dangling backslash");
    }
    switch (quoted[i]) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '"': out += '"'; break;
      case 'x': {
        auto hex = [](char h) { return std::isxdigit(static_cast<unsigned char>(h)) != 0; };
        if (i + 2 >= quoted.size() || !hex(quoted[i + 1]) || !hex(quoted[i + 2])) {
          throw UsageError(where + ": malformed \\x escape");
        }
        out += static_cast<char>(std::stoi(std::string(quoted.substr(i + 1, 2)), nullptr, 16));
        i += 2;
        break;
      }
      default: throw UsageError(where + ": unknown escape '\\" + std::string(1, quoted[i]) + "'");
    }
  }
  return out;
}

}  // namespace

Environment process_environment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const size_t eq = text.find('=');
    if (eq != std::string_view::npos) {
      env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
    }
  }
  return env;
}

std::map<std::string, std::string> parse_downward_api(const std::string& text, const std::string& source) {
  std::map<std::string, std::string> values;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty()) {
      continue;
    }
    const std::string where = "'" + source + "' line " + std::to_string(number);
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError(where + ": expected key=\"value\"");
    }
    values[line.substr(0, eq)] = unquote(std::string_view(line).substr(eq + 1), where);
  }
  return values;
}

SucContext SucContext::load(const Environment& env, const std::filesystem::path& container_root) {
  SucContext suc;
  suc.node_name = get(env, "SYSTEM_UPGRADE_NODE_NAME");
  suc.pod_name = get(env, "SYSTEM_UPGRADE_POD_NAME");
  suc.pod_uid = get(env, "SYSTEM_UPGRADE_POD_UID");
  suc.plan_name = get(env, "SYSTEM_UPGRADE_PLAN_NAME");
  suc.plan_latest_hash = get(env, "SYSTEM_UPGRADE_PLAN_LATEST_HASH");
  suc.plan_latest_version = get(env, "SYSTEM_UPGRADE_PLAN_LATEST_VERSION");
  suc.kubernetes_service_host = get(env, "KUBERNETES_SERVICE_HOST");
  suc.kubernetes_service_port = get(env, "KUBERNETES_SERVICE_PORT");

  const std::filesystem::path pod_info = container_root / "run/system-upgrade/pod";
  suc.labels = read_downward_api(pod_info / "labels");
  suc.annotations = read_downward_api(pod_info / "annotations");
  if (const auto secrets = container_root / "run/system-upgrade/secrets"; directory_exists(secrets)) {
    suc.secrets_dir = secrets;
  }
  if (const auto account = container_root / "var/run/secrets/kubernetes.io/serviceaccount"; directory_exists(account)) {
    suc.service_account_dir = account;
  }
  return suc;
}

}  // namespace hoist
