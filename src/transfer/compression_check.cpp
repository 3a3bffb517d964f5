#include "compression_check.hpp"

#include <utility>

#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "transfer_support.hpp"

namespace hoist::transfer {

CompressionCheck::CompressionCheck(const ArchiveReader& reader)
    : m_thread([this, &reader]() { m_verdict.emplace(reader.check_compression(&m_stop)); }) {}

CompressionCheck::~CompressionCheck() {
  m_stop.store(true, std::memory_order_relaxed);
  if (m_thread.joinable()) {
    m_thread.join();
  }
}

void CompressionCheck::wait(const std::string& archive) {
  if (m_thread.joinable()) {
    m_thread.join();
  }
  if (!m_verdict) {
    return;  // waited for already
  }
  Expected<std::optional<std::string>> verdict = std::move(*m_verdict);
  m_verdict.reset();
  if (const std::optional<std::string> problem = std::move(verdict).value()) {
    throw Error(ExitCode::verification, "refusing archive " + in_quotes(archive) + ": " + *problem);
  }
}

}  // namespace hoist::transfer
