#include "hoist/model/suc_context.hpp"

#include <sys/stat.h>

#include <fcntl.h>

#include <cstdint>
#include <optional>
#include <sstream>

#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"

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

// The kubelet writes these files; a few KiB is usual, and one line may not cost more than this.
constexpr size_t k_max_downward_api_bytes = 1U << 20U;

void read_downward_api(const std::filesystem::path& path, std::map<std::string, std::string>& values,
                       std::vector<std::string>& warnings) {
  auto text = read_file_at(AT_FDCWD, path.string(), path.string(), k_max_downward_api_bytes);
  if (!text) {
    if (text.error().errnum != ENOENT) {
      warnings.push_back(text.error().message);
    }
    return;
  }
  DownwardApi parsed = parse_downward_api(*text, path.string());
  values = std::move(parsed.values);
  for (std::string& line : parsed.unreadable) {
    warnings.push_back(std::move(line));
  }
}

void append_utf8(std::string& out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xc0 | (code >> 6U));
    out += static_cast<char>(0x80 | (code & 0x3fU));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xe0 | (code >> 12U));
    out += static_cast<char>(0x80 | ((code >> 6U) & 0x3fU));
    out += static_cast<char>(0x80 | (code & 0x3fU));
  } else {
    out += static_cast<char>(0xf0 | (code >> 18U));
    out += static_cast<char>(0x80 | ((code >> 12U) & 0x3fU));
    out += static_cast<char>(0x80 | ((code >> 6U) & 0x3fU));
    out += static_cast<char>(0x80 | (code & 0x3fU));
  }
}

// Undoes Go's strconv.Quote, which the kubelet uses (%q) for every value: the escapes Go's strconv.Unquote
// reads in a double-quoted string, \a \b \f \n \r \t \v \\ \" \xHH \ooo \uHHHH \UHHHHHHHH, and no other. A
// value that would hold a NUL is refused with the rest: no string hoist reads may carry one.
std::optional<std::string> unquote(std::string_view quoted, std::string& why) {
  if (quoted.size() < 2 || quoted.front() != '"' || quoted.back() != '"') {
    why = "expected a double-quoted value";
    return std::nullopt;
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
      why = "dangling backslash";
      return std::nullopt;
    }
    const char kind = quoted[i];
    // The digits an escape takes, and their base.
    size_t digits = 0;
    uint32_t base = 16;
    switch (kind) {
      case 'a': out += '\a'; continue;
      case 'b': out += '\b'; continue;
      case 'f': out += '\f'; continue;
      case 'n': out += '\n'; continue;
      case 'r': out += '\r'; continue;
      case 't': out += '\t'; continue;
      case 'v': out += '\v'; continue;
      case '\\': out += '\\'; continue;
      case '"': out += '"'; continue;
      case 'x': digits = 2; break;
      case 'u': digits = 4; break;
      case 'U': digits = 8; break;
      case '0':
      case '1':
      case '2':
      case '3':
      case '4':
      case '5':
      case '6':
      case '7':
        digits = 3;
        base = 8;
        --i;  // the first digit is part of the number
        break;
      default: why = "unknown escape '\\" + escaped(std::string_view(&quoted[i], 1)) + "'"; return std::nullopt;
    }
    uint32_t code = 0;
    for (size_t d = 0; d < digits; ++d) {
      const int value = i + 1 + d < quoted.size() ? hex_digit_value(quoted[i + 1 + d]) : -1;
      if (value < 0 || static_cast<uint32_t>(value) >= base) {
        why = std::string("malformed \\") + kind + " escape";
        return std::nullopt;
      }
      code = code * base + static_cast<uint32_t>(value);
    }
    i += digits;
    if (kind == 'u' || kind == 'U') {
      if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
        why = std::string("\\") + kind + " escape of no Unicode character";
        return std::nullopt;
      }
      append_utf8(out, code);
    } else if (code > 0xff) {
      why = "octal escape past 255";
      return std::nullopt;
    } else {
      out += static_cast<char>(code);  // \x and octal are bytes, not characters
    }
  }
  if (out.find('\0') != std::string::npos) {
    why = "the value holds a NUL";
    return std::nullopt;
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

DownwardApi parse_downward_api(const std::string& text, const std::string& source) {
  DownwardApi result;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty()) {
      continue;
    }
    std::string why;
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) {
      why = "expected key=\"value\"";
    } else if (auto value = unquote(std::string_view(line).substr(eq + 1), why)) {
      result.values[line.substr(0, eq)] = std::move(*value);
      continue;
    }
    result.unreadable.push_back("'" + escaped(source) + "' line " + std::to_string(number) + ": " + why);
  }
  return result;
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
  read_downward_api(pod_info / "labels", suc.labels, suc.warnings);
  read_downward_api(pod_info / "annotations", suc.annotations, suc.warnings);
  if (const auto secrets = container_root / "run/system-upgrade/secrets"; directory_exists(secrets)) {
    suc.secrets_dir = secrets;
  }
  if (const auto account = container_root / "var/run/secrets/kubernetes.io/serviceaccount"; directory_exists(account)) {
    suc.service_account_dir = account;
  }
  return suc;
}

}  // namespace hoist
