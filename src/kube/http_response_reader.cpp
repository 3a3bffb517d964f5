#include "hoist/kube/http_response_reader.hpp"

#include <algorithm>
#include <cerrno>

#include "hoist/util/text.hpp"

namespace hoist {

namespace {

constexpr std::size_t k_max_head_bytes = std::size_t{64} * 1024;
// Past any real body; the bound keeps the arithmetic far from overflow.
constexpr std::size_t k_max_length_digits = 18;  // < 10^18 bytes
constexpr std::size_t k_max_chunk_digits = 15;   // < 2^60 bytes

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// RFC 9110 5.6.2: tchar.
bool is_token_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || is_digit(c) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); });
  return text;
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// Leading zeros are allowed (1*DIGIT) and do not count against the bound.
std::size_t significant_digits(std::string_view digits) {
  const auto first = digits.find_first_not_of('0');
  return first == std::string_view::npos ? 0 : digits.size() - first;
}

// A header value may hold HTAB and obs-text, never another control character.
bool clean_value(std::string_view value) {
  return std::none_of(value.begin(), value.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
}

}  // namespace

SysError HttpResponseReader::protocol_error(const std::string& what) const {
  return SysError{"malformed HTTP response from '" + m_peer + "': " + what, EPROTO};
}

SysError HttpResponseReader::closed_early() const {
  return SysError{"the server '" + m_peer + "' closed the connection in the middle of a response", ECONNRESET};
}

Expected<HttpResponseHead> HttpResponseReader::read_head(const Fill& fill) {
  std::size_t end = 0;
  while ((end = m_in.find("\r\n\r\n")) == std::string::npos) {
    if (m_in.size() > k_max_head_bytes) {
      return protocol_error("headers larger than 64 KiB");
    }
    auto got = fill(m_in);
    if (!got) {
      return got.error();
    }
    if (*got == 0) {
      return SysError{"the server '" + m_peer + "' closed the connection before it answered", ECONNRESET};
    }
  }
  if (end > k_max_head_bytes) {
    return protocol_error("headers larger than 64 KiB");
  }
  const std::string head = m_in.substr(0, end + 2);
  m_in.erase(0, end + 4);

  HttpResponseHead response;
  std::size_t line_end = head.find("\r\n");
  const std::string status_line = head.substr(0, line_end);
  // "HTTP/1.1 200 OK": the version, one space, three digits, then a space and the reason or nothing.
  const bool good_status = status_line.size() >= 12 && status_line.starts_with("HTTP/1.") && is_digit(status_line[7]) &&
                           status_line[8] == ' ' && is_digit(status_line[9]) && is_digit(status_line[10]) &&
                           is_digit(status_line[11]) && (status_line.size() == 12 || status_line[12] == ' ') &&
                           clean_value(status_line);
  if (!good_status) {
    return protocol_error("bad status line '" + escaped(status_line.substr(0, 80)) + "'");
  }
  response.status = (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0');
  // RFC 9110 15: values outside 100..599 are invalid (found by fuzz/http_framing.cpp: "002" was status 2).
  if (response.status < 100 || response.status > 599) {
    return protocol_error("status code " + status_line.substr(9, 3) + " outside 100-599");
  }
  response.reason = status_line.size() > 13 ? status_line.substr(13) : "";

  std::size_t content_lengths = 0;
  for (std::size_t start = line_end + 2; start < head.size(); start = line_end + 2) {
    line_end = head.find("\r\n", start);
    const std::string line = head.substr(start, line_end - start);
    const auto colon = line.find(':');
    // No space before the colon and no folded line (RFC 9112 5.1, 5.2): both are refused, not guessed at.
    if (colon == std::string::npos || colon == 0 ||
        !std::all_of(line.begin(), line.begin() + static_cast<long>(colon), is_token_char)) {
      return protocol_error("bad header line");
    }
    const std::string name = lowercase(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if (!clean_value(value)) {
      return protocol_error("a control character in header '" + name + "'");
    }
    if (name == "content-length") {
      if (++content_lengths > 1 && response.headers[name] != value) {
        return protocol_error("two different Content-Length headers");
      }
    } else if (name == "transfer-encoding" && response.headers.contains(name)) {
      return protocol_error("two Transfer-Encoding headers");
    }
    response.headers[name] = value;
  }
  if (auto framing = choose_framing(response, content_lengths); !framing) {
    return framing.error();
  }
  return response;
}

Expected<void> HttpResponseReader::choose_framing(const HttpResponseHead& head, std::size_t content_lengths) {
  m_chunk = ChunkState::size;
  const auto encoding = head.headers.find("transfer-encoding");
  const auto length = head.headers.find("content-length");
  if (encoding != head.headers.end()) {
    // Both would leave the body's end to whichever the reader believes (request smuggling's lever).
    if (content_lengths > 0) {
      return protocol_error("both Content-Length and Transfer-Encoding");
    }
    if (lowercase(encoding->second) != "chunked") {
      return protocol_error("unsupported Transfer-Encoding '" + escaped(encoding->second.substr(0, 40)) + "'");
    }
    m_framing = Framing::chunked;
  } else if (length != head.headers.end()) {
    const std::string& digits = length->second;
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), is_digit)) {
      return protocol_error("bad Content-Length '" + escaped(digits.substr(0, 40)) + "'");
    }
    if (significant_digits(digits) > k_max_length_digits) {
      return protocol_error("Content-Length of more than " + std::to_string(k_max_length_digits) + " digits");
    }
    m_remaining = 0;
    for (const char c : digits) {
      m_remaining = m_remaining * 10 + static_cast<std::uint64_t>(c - '0');
    }
    m_framing = Framing::length;
  } else if (head.status == 204 || head.status == 304 || head.status / 100 == 1) {
    m_framing = Framing::length;
    m_remaining = 0;
  } else {
    m_framing = Framing::until_close;
  }
  return {};
}

// chunk-size [ BWS ";" chunk-ext ]: 1*HEXDIG, nothing before it, nothing but an extension after it.
Expected<void> HttpResponseReader::read_chunk_size(const std::string& line) {
  std::size_t digits = 0;
  while (digits < line.size() && hex_digit_value(line[digits]) >= 0) {
    ++digits;
  }
  const std::string rest = trim(line.substr(digits));
  if (digits == 0 || (!rest.empty() && rest.front() != ';') || !clean_value(line)) {
    return protocol_error("bad chunk size '" + escaped(line.substr(0, 20)) + "'");
  }
  if (significant_digits(std::string_view(line).substr(0, digits)) > k_max_chunk_digits) {
    return protocol_error("chunk size of more than " + std::to_string(k_max_chunk_digits) + " hex digits");
  }
  m_remaining = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    m_remaining = m_remaining * 16 + static_cast<std::uint64_t>(hex_digit_value(line[i]));
  }
  m_chunk = m_remaining == 0 ? ChunkState::trailers : ChunkState::data;
  return {};
}

Expected<std::string> HttpResponseReader::read_chunked(const Fill& fill) {
  for (;;) {
    switch (m_chunk) {
      case ChunkState::size:
      case ChunkState::data_end:
      case ChunkState::trailers: {
        const auto eol = m_in.find("\r\n");
        if (eol == std::string::npos) {
          if (m_in.size() > k_max_head_bytes) {  // a size or trailer line without end
            return protocol_error("a chunk line longer than 64 KiB");
          }
          break;  // need more bytes
        }
        std::string line = m_in.substr(0, eol);
        m_in.erase(0, eol + 2);
        if (m_chunk == ChunkState::data_end) {
          if (!line.empty()) {
            return protocol_error("chunk not followed by CRLF");
          }
          m_chunk = ChunkState::size;
        } else if (m_chunk == ChunkState::trailers) {
          if (line.empty()) {
            m_chunk = ChunkState::done;
          }
        } else if (auto size = read_chunk_size(line); !size) {
          return size.error();
        }
        continue;
      }
      case ChunkState::data: {
        if (!m_in.empty()) {
          const std::size_t take = std::min<std::uint64_t>(m_remaining, m_in.size());
          std::string data = m_in.substr(0, take);
          m_in.erase(0, take);
          m_remaining -= take;
          if (m_remaining == 0) {
            m_chunk = ChunkState::data_end;
          }
          return data;
        }
        break;
      }
      case ChunkState::done: return std::string();
    }
    auto got = fill(m_in);
    if (!got) {
      return got.error();
    }
    if (*got == 0) {
      return closed_early();
    }
  }
}

Expected<std::string> HttpResponseReader::read_some(const Fill& fill) {
  switch (m_framing) {
    case Framing::none: return protocol_error("body read before the head");
    case Framing::chunked: return read_chunked(fill);
    case Framing::length:
    case Framing::until_close: break;
  }
  if (m_framing == Framing::length && m_remaining == 0) {
    return std::string();
  }
  if (m_in.empty()) {
    auto got = fill(m_in);
    if (!got) {
      return got.error();
    }
    if (*got == 0) {
      if (m_framing == Framing::until_close) {
        return std::string();
      }
      return closed_early();
    }
  }
  std::size_t take = m_in.size();
  if (m_framing == Framing::length) {
    take = std::min<std::uint64_t>(take, m_remaining);
    m_remaining -= take;
  }
  std::string data = m_in.substr(0, take);
  m_in.erase(0, take);
  return data;
}

Expected<std::string> HttpResponseReader::read_body(const Fill& fill, std::size_t max_bytes) {
  std::string body;
  for (;;) {
    auto part = read_some(fill);
    if (!part) {
      return part.error();
    }
    if (part->empty()) {
      return body;
    }
    body += *part;
    if (body.size() > max_bytes) {
      return SysError{"the response from '" + m_peer + "' is larger than " + std::to_string(max_bytes) + " bytes",
                      EFBIG};
    }
  }
}

}  // namespace hoist
