#pragma once

namespace hoist {

/// While it lives, libarchive calls on this thread take the charset of the locale to be UTF-8, so that names it
/// decodes from UTF-16 (7-Zip, ISO 9660's Joliet, RAR 4, LHA) or from a format's UTF-8 (CAB) come out as UTF-8.
///
/// libarchive converts every such name to the locale's charset (nl_langinfo(CODESET)), and the static binary runs
/// in the C locale, whose charset is ASCII, in an image with no locale to switch to: a name with a byte past 0x7f
/// then has no conversion, and libarchive drops it. The link wraps nl_langinfo (`-Wl,--wrap=nl_langinfo`, set on
/// hoist_sys in CMakeLists.txt), and the wrapper answers "UTF-8" to CODESET where one of these lives; libarchive is
/// its only caller. Only ArchiveReader makes one, for the formats above: a tar's names and a zip's come out as their
/// bytes without it, and with it libarchive would compose a decomposed (NFD) UTF-8 name to NFC.
class ArchiveNamesAsUtf8 {
 public:
  ArchiveNamesAsUtf8();
  ~ArchiveNamesAsUtf8();
  ArchiveNamesAsUtf8(const ArchiveNamesAsUtf8&) = delete;
  ArchiveNamesAsUtf8& operator=(const ArchiveNamesAsUtf8&) = delete;

 private:
  bool m_outer;
};

}  // namespace hoist
