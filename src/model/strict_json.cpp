#include "strict_json.hpp"

#include <set>
#include <string>
#include <vector>

#include "hoist/util/text.hpp"

namespace hoist {

using nlohmann::json;

namespace {

// Thrown out of the parser callback; carries the key path only.
struct DuplicateKey {
  std::string path;
};

// nlohmann keeps the last of duplicate keys silently; a document where a key
// appears twice is ambiguous, so the parser callback tracks the key path and
// refuses it.
class DuplicateKeyCheck {
 public:
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        start_element();
        m_frames.push_back({event == json::parse_event_t::object_start, {}, {}, -1});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end: m_frames.pop_back(); break;
      case json::parse_event_t::key: {
        Frame& frame = m_frames.back();
        frame.key = parsed.get<std::string>();
        if (!frame.keys.insert(frame.key).second) {
          throw DuplicateKey{path()};
        }
        break;
      }
      case json::parse_event_t::value: start_element(); break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    long index;
  };
  void start_element() {
    if (!m_frames.empty() && !m_frames.back().object) {
      ++m_frames.back().index;
    }
  }
  [[nodiscard]] std::string path() const {
    std::string result = "$";
    for (const Frame& frame : m_frames) {
      result += frame.object ? "." + escaped(frame.key) : "[" + std::to_string(frame.index) + "]";
    }
    return result;
  }
  std::vector<Frame> m_frames;
};

// nlohmann's message without its "[json.exception...] " prefix and without the
// "; last read: '<token>'" part, which quotes the text.
std::string without_quoted_text(const json::parse_error& e) {
  std::string message = e.what();
  if (const size_t prefix = message.find("] ");
      message.starts_with("[json.exception.") && prefix != std::string::npos) {
    message.erase(0, prefix + 2);
  }
  if (const size_t quote = message.find("; last read:"); quote != std::string::npos) {
    message.erase(quote);
  }
  return message;
}

}  // namespace

Expected<json> parse_strict_json(std::string_view text) {
  DuplicateKeyCheck duplicates;
  try {
    return json::parse(text, std::ref(duplicates));
  } catch (const DuplicateKey& duplicate) {
    return SysError{duplicate.path + ": duplicate key", 0};
  } catch (const json::parse_error& e) {
    return SysError{without_quoted_text(e), 0};
  } catch (const json::out_of_range&) {
    // A number past double's range (1e400, found by fuzz/manifest.cpp); nlohmann's message quotes it.
    return SysError{"a number is out of range", 0};
  } catch (const json::exception& e) {
    return SysError{"invalid JSON (nlohmann error " + std::to_string(e.id) + ")", 0};
  }
}

}  // namespace hoist
