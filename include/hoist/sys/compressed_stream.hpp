#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"

namespace hoist {

/// The compression around an archive, told by its first bytes.
enum class Compression { none, gzip, bzip2, xz, lzip, zstd, lz4 };

/// The compression whose magic `head` starts with; nullopt for a compression
/// hoist does not read (lzop, lrzip, grzip, compress, legacy lz4),
/// with its name in `unsupported`.
std::optional<Compression> detect_compression(std::string_view head, std::string& unsupported);

/// The name of a compression ("gzip", "xz", …; "none").
std::string_view compression_name(Compression compression);

/// Decodes the whole compressed stream at `fd` (read with pread from offset 0;
/// the output is discarded) and checks what the format itself guarantees:
/// gzip's CRC-32 and ISIZE of every member, bzip2's block and stream CRCs, xz's
/// check (CRC32, CRC64 or SHA-256) and index, lzip's CRC-32 and sizes, zstd's and lz4's content checksums
/// where the frame has one (and lz4's block checksums), and that nothing but
/// further members follows the last one. libarchive leaves some of these
/// unchecked (gzip's trailer) and the others to data it may never read (a tar
/// reader stops at the end-of-archive blocks, before the trailer).
/// Returns why the stream is damaged ("its gzip CRC-32 does not match its
/// data"), or nullopt when it is whole; a SysError when the file cannot be read,
/// and ECANCELED soon after `stop` (when given) is set from another thread.
Expected<std::optional<std::string>> check_compressed_stream(int fd, Compression compression,
                                                             const std::atomic<bool>* stop = nullptr);

}  // namespace hoist
