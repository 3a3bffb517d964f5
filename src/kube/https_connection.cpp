#include "hoist/kube/https_connection.hpp"

namespace hoist {

HttpsConnection::HttpsConnection(TlsStream stream) : m_stream(std::move(stream)), m_reader(m_stream.peer()) {}

Expected<HttpsConnection> HttpsConnection::open(const TlsContext& tls, const std::string& host, std::uint16_t port,
                                                Deadline deadline, const WakeFlag* interrupt) {
  auto stream = TlsStream::open(tls, host, port, deadline, interrupt);
  if (!stream) {
    return stream.error();
  }
  return HttpsConnection(std::move(*stream));
}

Expected<void> HttpsConnection::send(const std::string& request, Deadline deadline) {
  return m_stream.send(request, deadline);
}

Expected<HttpResponseHead> HttpsConnection::read_head(Deadline deadline) {
  return m_reader.read_head([&](std::string& in) { return m_stream.fill(in, deadline); });
}

Expected<std::string> HttpsConnection::read_some(Deadline deadline) {
  return m_reader.read_some([&](std::string& in) { return m_stream.fill(in, deadline); });
}

Expected<std::string> HttpsConnection::read_body(Deadline deadline, std::size_t max_bytes) {
  return m_reader.read_body([&](std::string& in) { return m_stream.fill(in, deadline); }, max_bytes);
}

}  // namespace hoist
