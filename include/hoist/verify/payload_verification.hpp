#pragma once

#include <optional>
#include <vector>

#include "hoist/model/component.hpp"
#include "hoist/transfer/content_index.hpp"
#include "hoist/transfer/payload.hpp"
#include "hoist/verify/checksums.hpp"

namespace hoist {

/// Checks a payload against the component's SHA256SUMS (after checking the
/// SHA256SUMS's detached signature when a public key is given), reading only
/// the payload, so that it runs before anything on the host changes.
///  - a directory: every regular file under it must be listed and match, and
///    every listed name must be there (the SHA256SUMS file and its signature,
///    when they sit inside the payload, are not payload files);
///  - an archive or a single file: the file itself, listed under its file
///    name, as systemd-sysupdate's SHA256SUMS lists artifacts, or under
///    `spec.sha256sums_entry` when given (check_sums_entry_applies() first).
/// Without sha256sums, does nothing and returns nullopt; else returns the sums
/// it checked against. A mismatch throws Error(ExitCode::verification) naming
/// the file. An archive or a single file is hashed through Payload::reopen():
/// the file that staging reads, whatever is at its path by then.
///
/// With `installed` (the tree the transfer compares a directory payload with, Installer::installed_tree()), a
/// payload file whose listed digest that tree holds under the same name, as its content index vouches for the file
/// now, is not read: the transfer keeps the installed file (which holds the listed bytes), or, should it copy the
/// payload's after all (its metadata differing), the staged copy's check (verify_staged_tree()) reads it there.
/// `unread`, when given, gets a flag per entry of the sums (in their order): set for each file left unread.
/// A directory payload is walked by `threads` threads (transfer_threads(): 0 is twice the cores), each directory a
/// task, as the transfer walks it.
std::optional<Sha256Sums> verify_payload(const ComponentSpec& spec, const Payload& payload,
                                         const IndexedTree* installed = nullptr, std::vector<bool>* unread = nullptr,
                                         unsigned threads = 0);

/// Throws UsageError when `spec` names a sums entry (`--sha256sums-entry`) for a directory payload, whose files are
/// listed under their own names: checked once for every run that verifies, before either way of verifying.
void check_sums_entry_applies(const ComponentSpec& spec, const Payload& payload);

/// The component's SHA256SUMS (`spec.sha256sums`), its detached signature checked first when a public key is
/// given, as verify_payload() loads them, without reading the payload. Throws as verify_payload() does.
Sha256Sums load_payload_sums(const ComponentSpec& spec);

/// For a directory payload: every regular file under it is listed in `sums` and every listed name is there (the
/// SHA256SUMS file and its signature excepted), as verify_payload() requires, without reading a file: what is left
/// of verify_payload() when a staged copy's content index is compared with the sums instead (a version `hoist
/// stage` staged). Throws Error(ExitCode::verification) naming the file. Does nothing for a file or archive.
void check_payload_listing(const Sha256Sums& sums, const ComponentSpec& spec, const Payload& payload);

/// For a directory payload, whose files staging opens one by one after
/// verify_payload(): checks the copy staged (or synced), as its content index
/// `staged` describes it, against `sums`, what verify_payload() returned, so that a
/// payload file replaced in between is caught. The index holds every regular file
/// of the copy with the SHA-256 of the bytes written (hashed as they were written)
/// or of the old file linked in its place (as the old version's index vouched for
/// it): nothing is read again. Throws Error(ExitCode::verification) naming the
/// payload and the file. Does nothing for a file or archive payload (whose bytes
/// Payload::check_unchanged() vouches for). A file that `unread` (from verify_payload()) marks was read for
/// the first time by staging: a mismatch there is the payload's, named as verify_payload() names one.
void verify_staged_tree(const Sha256Sums& sums, const ComponentSpec& spec, const Payload& payload,
                        const ContentIndex& staged, const std::vector<bool>* unread = nullptr);

}  // namespace hoist
