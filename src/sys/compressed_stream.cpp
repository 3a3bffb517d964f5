#include "hoist/sys/compressed_stream.hpp"

#include <bzlib.h>
#include <lz4frame.h>
#include <lzma.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace hoist {

namespace {

constexpr size_t k_chunk = size_t{256} * 1024;

/// The file's bytes in chunks, read with pread so that the offset libarchive
/// keeps on the same descriptor stays where it is.
class Source {
 public:
  Source(int fd, const std::atomic<bool>* stop) : m_fd(fd), m_stop(stop), m_buffer(k_chunk) {}

  /// The next chunk; empty at the end of the file; ECANCELED once `stop` is set.
  Expected<std::string_view> next() {
    if (m_stop != nullptr && m_stop->load(std::memory_order_relaxed)) {
      return SysError{"stopped checking the archive's compressed stream", ECANCELED};
    }
    for (;;) {
      const ssize_t n = ::pread(m_fd, m_buffer.data(), m_buffer.size(), static_cast<off_t>(m_offset));
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n < 0) {
        return sys_error("read the archive's compressed stream");
      }
      m_offset += static_cast<uint64_t>(n);
      return std::string_view(m_buffer.data(), static_cast<size_t>(n));
    }
  }

 private:
  int m_fd;
  const std::atomic<bool>* m_stop;
  uint64_t m_offset = 0;
  std::vector<char> m_buffer;
};

using Verdict = Expected<std::optional<std::string>>;

std::string truncated(std::string_view format) {
  return "it ends before the end of its " + std::string(format) + " stream";
}

Verdict check_gzip(Source& source) {
  z_stream z{};
  // 15 + 16: a gzip wrapper, whose trailer (CRC-32, ISIZE) inflate() checks.
  if (inflateInit2(&z, 15 + 16) != Z_OK) {
    return SysError{"failed to start a gzip decoder: out of memory", ENOMEM};
  }
  const std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  std::vector<unsigned char> out(k_chunk);
  std::string_view chunk;
  bool in_member = false;
  bool first_member = true;
  bool output_full = false;  // then inflate may hold decoded bytes back: call it again before reading on
  for (;;) {
    if (z.avail_in == 0 && !output_full) {
      auto next = source.next();
      if (!next) {
        return next.error();
      }
      chunk = *next;
      if (chunk.empty()) {
        return in_member ? std::optional(truncated("gzip")) : std::nullopt;
      }
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(chunk.data()));
      z.avail_in = static_cast<uInt>(chunk.size());
    }
    in_member = true;
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    output_full = z.avail_out == 0;
    if (rc == Z_STREAM_END) {
      // gzip allows members one after another (`cat a.gz b.gz`); anything else after one is refused.
      inflateReset(&z);
      in_member = false;
      first_member = false;
      continue;
    }
    if (rc == Z_DATA_ERROR) {
      const std::string_view why = z.msg != nullptr ? z.msg : "invalid data";
      if (why == "incorrect data check") {
        return std::optional<std::string>("its gzip CRC-32 does not match its data");
      }
      if (why == "incorrect length check") {
        return std::optional<std::string>("its gzip ISIZE does not match its data's length");
      }
      if (!first_member && why == "incorrect header check") {
        return std::optional<std::string>("bytes that are not a gzip member follow its last gzip member");
      }
      return std::optional<std::string>("its gzip data is damaged (" + std::string(why) + ")");
    }
    if (rc == Z_MEM_ERROR) {
      return SysError{"failed to decode the gzip stream: out of memory", ENOMEM};
    }
    // Z_OK, or Z_BUF_ERROR when inflate needs more input: read on.
  }
}

Verdict check_bzip2(Source& source) {
  bz_stream bz{};
  if (BZ2_bzDecompressInit(&bz, 0, 0) != BZ_OK) {
    return SysError{"failed to start a bzip2 decoder: out of memory", ENOMEM};
  }
  std::unique_ptr<bz_stream, int (*)(bz_stream*)> guard(&bz, BZ2_bzDecompressEnd);
  std::vector<char> out(k_chunk);
  std::string_view chunk;
  bool in_stream = false;
  bool output_full = false;
  for (;;) {
    if (bz.avail_in == 0 && !output_full) {
      auto next = source.next();
      if (!next) {
        return next.error();
      }
      chunk = *next;
      if (chunk.empty()) {
        return in_stream ? std::optional(truncated("bzip2")) : std::nullopt;
      }
      bz.next_in = const_cast<char*>(chunk.data());
      bz.avail_in = static_cast<unsigned>(chunk.size());
    }
    in_stream = true;
    bz.next_out = out.data();
    bz.avail_out = static_cast<unsigned>(out.size());
    const int rc = BZ2_bzDecompress(&bz);
    output_full = bz.avail_out == 0;
    if (rc == BZ_STREAM_END) {
      // pbzip2 writes one stream a block: start over on the rest.
      char* const rest = bz.next_in;
      const unsigned rest_size = bz.avail_in;
      BZ2_bzDecompressEnd(&bz);
      bz = bz_stream{};
      if (BZ2_bzDecompressInit(&bz, 0, 0) != BZ_OK) {
        guard.release();
        return SysError{"failed to start a bzip2 decoder: out of memory", ENOMEM};
      }
      bz.next_in = rest;
      bz.avail_in = rest_size;
      in_stream = false;
      continue;
    }
    if (rc == BZ_DATA_ERROR) {
      return std::optional<std::string>("its bzip2 data does not match its CRC (or is damaged)");
    }
    if (rc == BZ_DATA_ERROR_MAGIC) {
      return std::optional<std::string>("bytes that are not a bzip2 stream follow its last bzip2 stream");
    }
    if (rc == BZ_MEM_ERROR) {
      return SysError{"failed to decode the bzip2 stream: out of memory", ENOMEM};
    }
    if (rc != BZ_OK) {
      return std::optional<std::string>("its bzip2 data is damaged (error " + std::to_string(rc) + ")");
    }
  }
}

Verdict check_lzma(Source& source, bool lzip) {
  lzma_stream s = LZMA_STREAM_INIT;
  // Concatenated: xz allows several streams and stream padding, lzip several members. liblzma checks xz's
  // check (whatever its type) and index, and lzip's CRC-32 and sizes.
  const lzma_ret init = lzip ? lzma_lzip_decoder(&s, UINT64_MAX, LZMA_CONCATENATED)
                             : lzma_stream_decoder(&s, UINT64_MAX, LZMA_CONCATENATED);
  const std::string_view name = lzip ? "lzip" : "xz";
  if (init != LZMA_OK) {
    return SysError{"failed to start an " + std::string(name) + " decoder: out of memory", ENOMEM};
  }
  const std::unique_ptr<lzma_stream, void (*)(lzma_stream*)> guard(&s, lzma_end);
  std::vector<uint8_t> out(k_chunk);
  bool at_end = false;
  for (;;) {
    if (s.avail_in == 0 && !at_end) {
      auto next = source.next();
      if (!next) {
        return next.error();
      }
      at_end = next->empty();
      s.next_in = reinterpret_cast<const uint8_t*>(next->data());
      s.avail_in = next->size();
    }
    s.next_out = out.data();
    s.avail_out = out.size();
    const lzma_ret rc = lzma_code(&s, at_end ? LZMA_FINISH : LZMA_RUN);
    switch (rc) {
      case LZMA_OK: break;
      case LZMA_STREAM_END: return std::optional<std::string>();
      case LZMA_BUF_ERROR: return std::optional(truncated(name));
      case LZMA_MEM_ERROR:
        return SysError{"failed to decode the " + std::string(name) + " stream: out of memory", ENOMEM};
      case LZMA_DATA_ERROR:
        return std::optional<std::string>("its " + std::string(name) +
                                          " data does not decode or does not match its check (it is damaged)");
      case LZMA_FORMAT_ERROR:
        return std::optional<std::string>("bytes that are not " + std::string(name) + " follow its last " +
                                          std::string(name) + " stream");
      default:
        return std::optional<std::string>("its " + std::string(name) + " stream is damaged (liblzma error " +
                                          std::to_string(static_cast<int>(rc)) + ")");
    }
  }
}

Verdict check_zstd(Source& source) {
  const std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!ctx) {
    return SysError{"failed to start a zstd decoder: out of memory", ENOMEM};
  }
  std::vector<char> out(ZSTD_DStreamOutSize());
  size_t pending = 0;  // 0 between frames: more is needed only inside one
  for (;;) {
    auto next = source.next();
    if (!next) {
      return next.error();
    }
    if (next->empty()) {
      return pending != 0 ? std::optional(truncated("zstd")) : std::nullopt;
    }
    ZSTD_inBuffer in{next->data(), next->size(), 0};
    // Drain the output too: a frame may end with its checksum only after the last output is taken.
    while (in.pos < in.size || pending != 0) {
      ZSTD_outBuffer o{out.data(), out.size(), 0};
      pending = ZSTD_decompressStream(ctx.get(), &o, &in);
      if (ZSTD_isError(pending) != 0U) {
        if (ZSTD_getErrorCode(pending) == ZSTD_error_checksum_wrong) {
          return std::optional<std::string>("its zstd content checksum does not match its data");
        }
        return std::optional<std::string>("its zstd stream is damaged (" + std::string(ZSTD_getErrorName(pending)) +
                                          ")");
      }
      if (in.pos == in.size && o.pos < o.size) {
        break;  // everything of this chunk is decoded: read on
      }
    }
  }
}

std::optional<std::string> lz4_problem(size_t code) {
  const std::string_view why = LZ4F_getErrorName(code);
  if (why.find("contentChecksum") != std::string_view::npos) {
    return "its lz4 content checksum does not match its data";
  }
  if (why.find("blockChecksum") != std::string_view::npos) {
    return "an lz4 block checksum does not match its data";
  }
  return "its lz4 stream is damaged (" + std::string(why) + ")";
}

Verdict check_lz4(Source& source) {
  LZ4F_dctx* raw = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&raw, LZ4F_VERSION)) != 0U) {
    return SysError{"failed to start an lz4 decoder: out of memory", ENOMEM};
  }
  const std::unique_ptr<LZ4F_dctx, size_t (*)(LZ4F_dctx*)> ctx(raw, LZ4F_freeDecompressionContext);
  std::vector<char> out(k_chunk);
  size_t hint = 0;  // 0 between frames
  for (;;) {
    auto next = source.next();
    if (!next) {
      return next.error();
    }
    if (next->empty()) {
      // Decoded bytes held back for a full output come out (and the frame ends) without more input.
      while (hint != 0) {
        size_t out_size = out.size();
        size_t in_size = 0;
        hint = LZ4F_decompress(ctx.get(), out.data(), &out_size, nullptr, &in_size, nullptr);
        if (LZ4F_isError(hint) != 0U) {
          return lz4_problem(hint);
        }
        if (out_size == 0) {
          break;
        }
      }
      return hint != 0 ? std::optional(truncated("lz4")) : std::nullopt;
    }
    const char* in = next->data();
    size_t left = next->size();
    while (left > 0) {
      size_t out_size = out.size();
      size_t in_size = left;
      // LZ4F checks the header checksum, each block's checksum and the content checksum when the frame has them.
      hint = LZ4F_decompress(ctx.get(), out.data(), &out_size, in, &in_size, nullptr);
      if (LZ4F_isError(hint) != 0U) {
        return lz4_problem(hint);
      }
      in += in_size;
      left -= in_size;
    }
  }
}

bool starts_with(std::string_view head, std::string_view magic) {
  return head.substr(0, magic.size()) == magic;
}

}  // namespace

std::optional<Compression> detect_compression(std::string_view head, std::string& unsupported) {
  using namespace std::string_view_literals;
  unsupported.clear();
  if (starts_with(head, "\x1f\x8b"sv)) {
    return Compression::gzip;
  }
  if (starts_with(head, "BZh"sv) && head.size() > 3 && head[3] >= '1' && head[3] <= '9') {
    return Compression::bzip2;
  }
  if (starts_with(head,
                  "\xfd"
                  "7zXZ\0"sv)) {
    return Compression::xz;
  }
  if (starts_with(head, "LZIP"sv)) {
    return Compression::lzip;
  }
  if (starts_with(head, "\x28\xb5\x2f\xfd"sv)) {
    return Compression::zstd;
  }
  if (starts_with(head, "\x04\x22\x4d\x18"sv)) {
    return Compression::lz4;
  }
  // What libarchive would read through an external program (lzop, lrzip, grzip) or without a check
  // (compress, legacy lz4): named, so that the refusal says why.
  constexpr std::pair<std::string_view, std::string_view> k_unsupported[] = {
      {"\x89LZO\0\r\n\x1a\n"sv, "lzop"},
      {"LRZI"sv, "lrzip"},
      {"GRZipII"sv, "grzip"},
      {"\x1f\x9d"sv, "compress (.Z)"},
      {"\x02\x21\x4c\x18"sv, "legacy lz4"},
  };
  for (const auto& [magic, name] : k_unsupported) {
    if (starts_with(head, magic)) {
      unsupported = name;
      return std::nullopt;
    }
  }
  return Compression::none;
}

std::string_view compression_name(Compression compression) {
  switch (compression) {
    case Compression::none: return "none";
    case Compression::gzip: return "gzip";
    case Compression::bzip2: return "bzip2";
    case Compression::xz: return "xz";
    case Compression::lzip: return "lzip";
    case Compression::zstd: return "zstd";
    case Compression::lz4: return "lz4";
  }
  return "unknown";
}

Expected<std::optional<std::string>> check_compressed_stream(int fd, Compression compression,
                                                             const std::atomic<bool>* stop) {
  Source source(fd, stop);
  switch (compression) {
    case Compression::none: return std::optional<std::string>();
    case Compression::gzip: return check_gzip(source);
    case Compression::bzip2: return check_bzip2(source);
    case Compression::xz: return check_lzma(source, false);
    case Compression::lzip: return check_lzma(source, true);
    case Compression::zstd: return check_zstd(source);
    case Compression::lz4: return check_lz4(source);
  }
  return std::optional<std::string>();
}

}  // namespace hoist
