# shellcheck shell=bash
# Sourced by the recipes images/*/payload: what every payload needs.
#
# SOURCE_DATE_EPOCH (default: now) is the time stamp of the files that change
# with the release; files that stay the same from release to release get a
# fixed one. hoist's quick check compares size, mtime, mode and owner (as
# rsync does), so a changed file must not keep its old mtime, and an unchanged
# one keeps it, so that the host hard-links it from the current version.
set -euo pipefail
export LC_ALL=C.UTF-8
release_time=${SOURCE_DATE_EPOCH:-$(date +%s)}
static_time=1704067200      # 2024-01-01T00:00:00Z

die() { printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# stamp release|static PATH...: sets the mtime (not following symlinks).
stamp() {
    local when=$release_time
    [ "$1" = static ] && when=$static_time
    shift
    touch -h -d "@$when" "$@"
}

# write_sums DIR OUT NAME...: OUT lists NAME... (paths under DIR) in sha256sum's
# (and systemd-sysupdate's) SHA256SUMS format.
write_sums() {
    local dir=$1 out=$2
    shift 2
    (cd "$dir" && sha256sum -- "$@") >"$out"
}

# sign_sums SUMS: with HOIST_SIGNING_KEY (a PEM private key, Ed25519 or ECDSA
# P-256), writes SUMS.sig and prints the manifest keys that make hoist check it
# against the public key that the Plan mounts from a Secret
# (HOIST_PUBLIC_KEY_PATH, default /run/system-upgrade/secrets/hoist-release-key/release.pem).
# Without a key, prints nothing: the payload is checked against SUMS only.
sign_sums() {
    local sums=$1
    [ -n "${HOIST_SIGNING_KEY:-}" ] || return 0
    local public=${HOIST_PUBLIC_KEY_PATH:-/run/system-upgrade/secrets/hoist-release-key/release.pem}
    case "$(openssl pkey -in "$HOIST_SIGNING_KEY" -noout -text 2>/dev/null | head -n 1)" in
        ED25519*) openssl pkeyutl -sign -rawin -inkey "$HOIST_SIGNING_KEY" -in "$sums" -out "$sums.sig" ;;
        *) openssl dgst -sha256 -sign "$HOIST_SIGNING_KEY" -out "$sums.sig" "$sums" ;;
    esac
    printf ', "signature": "%s.sig", "public_key": "%s"' "$(basename "$sums")" "$public"
}
