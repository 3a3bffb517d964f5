#pragma once

#include "hoist/model/component.hpp"
#include "hoist/transfer/payload.hpp"

namespace hoist {

/// Checks a payload against the component's SHA256SUMS (after checking the
/// SHA256SUMS's detached signature when a public key is given), reading only
/// the payload, so that it runs before anything on the host changes.
///  - a directory: every regular file under it must be listed and match, and
///    every listed name must be there (the SHA256SUMS file and its signature,
///    when they sit inside the payload, are not payload files);
///  - an archive or a single file: the file itself, listed under its file
///    name, as systemd-sysupdate's SHA256SUMS lists artifacts.
/// Without sha256sums, does nothing. A mismatch throws
/// Error(ExitCode::verification) naming the file.
void verify_payload(const ComponentSpec& spec, const Payload& payload);

}  // namespace hoist
