#include "hoist/sys/yaml_document.hpp"

#include <yaml.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace hoist {

namespace {

// Deeper than any kubeconfig; bounds the recursion on hostile input.
constexpr int k_max_depth = 64;

struct ParserDelete {
  void operator()(yaml_parser_t* parser) const noexcept {
    yaml_parser_delete(parser);
    delete parser;  // NOLINT(cppcoreguidelines-owning-memory)
  }
};

// One parser event, deleted when it goes out of scope.
class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { reset(); }
  void reset() noexcept {
    if (m_loaded) {
      yaml_event_delete(&m_event);
      m_loaded = false;
    }
  }
  yaml_event_t* load_into() noexcept {
    reset();
    m_loaded = true;
    return &m_event;
  }
  [[nodiscard]] const yaml_event_t& operator*() const noexcept { return m_event; }
  [[nodiscard]] const yaml_event_t* operator->() const noexcept { return &m_event; }

 private:
  yaml_event_t m_event{};
  bool m_loaded = false;
};

// Builds JSON straight from libyaml's events. Not from its document API: that one
// resolves an alias to a shared node, and copying shared nodes out into a tree is
// what let ten lines of nested aliases grow to gigabytes. Kubeconfigs never use
// anchors or aliases, so both are refused where they appear, as are duplicate keys
// (which value would win is a guess); memory then stays linear in the input.
class EventReader {
 public:
  EventReader(yaml_parser_t* parser, std::string_view source) : m_parser(parser), m_source(source) {}

  Expected<nlohmann::json> document() {
    if (auto ok = next(); !ok) {  // stream start
      return ok.error();
    }
    if (auto ok = next(); !ok) {
      return ok.error();
    }
    if (m_event->type == YAML_STREAM_END_EVENT) {
      return nlohmann::json();  // an empty file
    }
    if (auto ok = next(); !ok) {  // past the document start: the root node
      return ok.error();
    }
    return node(0);
  }

 private:
  Expected<void> next() {
    if (yaml_parser_parse(m_parser, m_event.load_into()) != 1) {
      m_event.reset();
      const char* problem = m_parser->problem != nullptr ? m_parser->problem : "unknown error";
      return error_at(m_parser->problem_mark, problem);
    }
    return {};
  }

  [[nodiscard]] SysError error_at(const yaml_mark_t& mark, std::string_view why) const {
    return SysError{"failed to parse '" + std::string(m_source) + "' line " + std::to_string(mark.line + 1) +
                        " column " + std::to_string(mark.column + 1) + ": " + std::string(why),
                    EINVAL};
  }

  // The node whose first event is the current one; leaves its last event current.
  Expected<nlohmann::json> node(int depth) {
    const yaml_event_t& event = *m_event;
    if (depth > k_max_depth) {
      return error_at(event.start_mark, "nested deeper than " + std::to_string(k_max_depth) + " levels");
    }
    const yaml_char_t* anchor = nullptr;
    switch (event.type) {
      case YAML_ALIAS_EVENT: return error_at(event.start_mark, "an alias (*name): kubeconfigs have none, refused");
      case YAML_SCALAR_EVENT: anchor = event.data.scalar.anchor; break;
      case YAML_SEQUENCE_START_EVENT: anchor = event.data.sequence_start.anchor; break;
      case YAML_MAPPING_START_EVENT: anchor = event.data.mapping_start.anchor; break;
      default: return error_at(event.start_mark, "unexpected YAML event");
    }
    if (anchor != nullptr) {
      return error_at(event.start_mark, "an anchor (&name): kubeconfigs have none, refused");
    }
    if (event.type == YAML_SCALAR_EVENT) {
      std::string text(reinterpret_cast<const char*>(event.data.scalar.value), event.data.scalar.length);
      if (event.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && (text.empty() || text == "null" || text == "~")) {
        return nlohmann::json();
      }
      return nlohmann::json(std::move(text));
    }
    if (event.type == YAML_SEQUENCE_START_EVENT) {
      nlohmann::json array = nlohmann::json::array();
      for (;;) {
        if (auto ok = next(); !ok) {
          return ok.error();
        }
        if (m_event->type == YAML_SEQUENCE_END_EVENT) {
          return array;
        }
        auto value = node(depth + 1);
        if (!value) {
          return value.error();
        }
        array.push_back(std::move(*value));
      }
    }
    nlohmann::json object = nlohmann::json::object();
    for (;;) {
      if (auto ok = next(); !ok) {
        return ok.error();
      }
      if (m_event->type == YAML_MAPPING_END_EVENT) {
        return object;
      }
      if (m_event->type != YAML_SCALAR_EVENT) {
        if (m_event->type == YAML_ALIAS_EVENT) {
          return error_at(m_event->start_mark, "an alias (*name): kubeconfigs have none, refused");
        }
        return error_at(m_event->start_mark, "a mapping key is not a string");
      }
      auto key = node(depth + 1);
      if (!key) {
        return key.error();
      }
      const yaml_mark_t key_mark = m_event->start_mark;
      if (!key->is_string()) {  // a plain null or empty key
        return error_at(key_mark, "a mapping key is not a string");
      }
      const std::string name = key->get<std::string>();
      if (object.contains(name)) {
        return error_at(key_mark, "duplicate key");
      }
      if (auto ok = next(); !ok) {
        return ok.error();
      }
      auto value = node(depth + 1);
      if (!value) {
        return value.error();
      }
      object[name] = std::move(*value);
    }
  }

  yaml_parser_t* m_parser;
  std::string_view m_source;
  Event m_event;
};

}  // namespace

Expected<nlohmann::json> parse_yaml(std::string_view text, std::string_view source) {
  std::unique_ptr<yaml_parser_t, ParserDelete> parser(new yaml_parser_t{});
  if (yaml_parser_initialize(parser.get()) != 1) {
    return SysError{"failed to set up a YAML parser", ENOMEM};
  }
  yaml_parser_set_input_string(parser.get(), reinterpret_cast<const unsigned char*>(text.data()), text.size());
  EventReader reader(parser.get(), source);
  return reader.document();
}

bool yaml_true(std::string_view text) noexcept {
  // YAML 1.1's booleans, as go-yaml v2 (which kubectl reads kubeconfigs with) resolves a plain scalar.
  for (const std::string_view word : {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}) {
    if (text == word) {
      return true;
    }
  }
  return false;
}

bool yaml_false(std::string_view text) noexcept {
  for (const std::string_view word : {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}) {
    if (text == word) {
      return true;
    }
  }
  return false;
}

}  // namespace hoist
