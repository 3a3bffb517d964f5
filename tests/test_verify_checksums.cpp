#include "hoist/verify/checksums.hpp"

#include <catch2/catch.hpp>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "hoist/util/error.hpp"
#include "hoist/verify/sums_signature.hpp"
#include "scoped_temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  REQUIRE(out.good());
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Runs a shell command (the real openssl CLI, as users run it) and requires success.
void run(const std::string& command) {
  INFO(command);
  REQUIRE(std::system(command.c_str()) == 0);
}

/// The digest that 64 hex digits spell, as a walk hands it to Sha256Verifier.
hoist::Sha256Digest bytes(const std::string& hex) {
  const auto digest = hoist::digest_from_hex(hex);
  REQUIRE(digest);
  return *digest;
}

/// The hoist::Error that `f` throws; fails the test when it throws none.
template <typename F>
hoist::Error thrown_by(F&& f) {
  try {
    f();
  } catch (const hoist::Error& e) {
    return e;
  }
  FAIL("no hoist::Error was thrown");
  return {hoist::ExitCode::ok, ""};
}

// SHA-256 of "abc", of "hello\n" and of "k3s binary\n".
const std::string k_abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const std::string k_hello = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
const std::string k_k3s = "ccac4b0d3de4e68dac9820209a7ac7f08dcf21e1128f0db1b5e014cc5ac58baa";
const std::string k_source = "/payload/SHA256SUMS";

/// The message of the verification error that parsing `text` throws.
std::string parse_error(const std::string& text) {
  const hoist::Error e = thrown_by([&] { (void)hoist::Sha256Sums::parse(text, k_source); });
  CHECK(e.code() == hoist::ExitCode::verification);
  return e.what();
}

std::string invalid(int line, const std::string& what) {
  return "invalid SHA256SUMS '/payload/SHA256SUMS' line " + std::to_string(line) + ": " + what;
}

}  // namespace

namespace hoist {

// ---- parsing ----

TEST_CASE("SHA256SUMS lines in text mode and binary mode both parse", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  bin/k3s\n" + k_hello + " *etc/hello.conf\n", k_source);
  REQUIRE(sums.entries().size() == 2);
  CHECK(sums.entries()[0].name == "bin/k3s");
  CHECK(to_hex(sums.entries()[0].digest) == k_abc);
  CHECK(sums.entries()[1].name == "etc/hello.conf");
  CHECK(to_hex(sums.entries()[1].digest) == k_hello);
  CHECK(sums.source() == k_source);
}

TEST_CASE("SHA256SUMS digests in upper case are kept in lower case", "[core][checksums]") {
  std::string upper = k_abc;
  for (char& c : upper) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  const Sha256Sums sums = Sha256Sums::parse(upper + "  k3s\n", k_source);
  CHECK(sums.expected_for("k3s") == k_abc);
}

TEST_CASE("SHA256SUMS without a final newline parses the same", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  a\n" + k_hello + "  b", k_source);
  CHECK(sums.entries().size() == 2);
  CHECK(sums.expected_for("b") == k_hello);
}

TEST_CASE("SHA256SUMS names may contain spaces and a leading dot", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  share/doc/read me\n" + k_hello + "  etc/.hidden\n", k_source);
  CHECK(sums.expected_for("share/doc/read me") == k_abc);
  CHECK(sums.expected_for("etc/.hidden") == k_hello);
}

TEST_CASE("expected_for gives nothing for a name that is not listed", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  bin/k3s\n", k_source);
  CHECK_FALSE(sums.expected_for("bin/k3s2").has_value());
  CHECK_FALSE(sums.expected_for("k3s").has_value());
}

TEST_CASE("a SHA256SUMS hash of the wrong length or with a non-hex digit is refused", "[core][checksums]") {
  CHECK(parse_error(k_abc.substr(1) + "  k3s\n") == invalid(1, "expected 64 hex digits"));
  CHECK(parse_error(k_abc + "0  k3s\n") == invalid(1, "expected 64 hex digits"));
  CHECK(parse_error("g" + k_abc.substr(1) + "  k3s\n") == invalid(1, "expected 64 hex digits"));
  CHECK(parse_error(k_abc + "  a\nSHA256 (k3s) = " + k_abc + "\n") == invalid(2, "expected 64 hex digits"));
  CHECK(parse_error(" " + k_abc + "  k3s\n") == invalid(1, "expected 64 hex digits"));
}

TEST_CASE("SHA256SUMS with CRLF line endings is refused, naming the line", "[core][checksums]") {
  CHECK(parse_error(k_abc + "  k3s\r\n") ==
        invalid(1, "ends with a carriage return (CRLF line endings are not accepted)"));
  CHECK(parse_error(k_abc + "  a\n" + k_hello + "  b\r") ==
        invalid(2, "ends with a carriage return (CRLF line endings are not accepted)"));
}

TEST_CASE("a blank line in SHA256SUMS is refused", "[core][checksums]") {
  CHECK(parse_error(k_abc + "  a\n\n" + k_hello + "  b\n") == invalid(2, "empty line"));
  CHECK(parse_error(k_abc + "  a\n\n") == invalid(2, "empty line"));
  CHECK(parse_error("\n") == invalid(1, "empty line"));
}

TEST_CASE("a SHA256SUMS line without two spaces or ' *' after the hash is refused", "[core][checksums]") {
  const std::string what = "expected two spaces or ' *' between the hash and the file name";
  CHECK(parse_error(k_abc + " k3s\n") == invalid(1, what));
  CHECK(parse_error(k_abc + "\tk3s\n") == invalid(1, what));
  CHECK(parse_error(k_abc + "*k3s\n") == invalid(1, what));
  CHECK(parse_error(k_abc + " \tk3s\n") == invalid(1, what));
}

TEST_CASE("a SHA256SUMS line without a file name is refused", "[core][checksums]") {
  CHECK(parse_error(k_abc + "\n") == invalid(1, "missing file name"));
  CHECK(parse_error(k_abc + " \n") == invalid(1, "missing file name"));
  CHECK(parse_error(k_abc + "  \n") == invalid(1, "missing file name"));
  CHECK(parse_error(k_abc + " *") == invalid(1, "missing file name"));
}

TEST_CASE("a SHA256SUMS file name with a NUL or control character is refused", "[core][checksums]") {
  CHECK(parse_error(k_abc + "  bin/k3s" + std::string(1, '\0') + "x\n") == invalid(1, "file name contains a NUL byte"));
  CHECK(parse_error(k_abc + "  bin/k\x1b[0m\n") == invalid(1, "file name contains a control character"));
  CHECK(parse_error(k_abc + "  bin/k\r3s\n") == invalid(1, "file name contains a control character"));
}

TEST_CASE("a SHA256SUMS file name that is not a clean relative path is refused", "[core][checksums]") {
  CHECK(parse_error(k_abc + "  /bin/k3s\n") == invalid(1, "file name '/bin/k3s' is not relative"));
  CHECK(parse_error(k_abc + "  ../k3s\n") == invalid(1, "file name '../k3s' has a '..' component"));
  CHECK(parse_error(k_abc + "  bin/../../etc/shadow\n") ==
        invalid(1, "file name 'bin/../../etc/shadow' has a '..' component"));
  CHECK(parse_error(k_abc + "  bin/..\n") == invalid(1, "file name 'bin/..' has a '..' component"));
  CHECK(parse_error(k_abc + "  ./bin/k3s\n") == invalid(1, "file name './bin/k3s' has a '.' component"));
  CHECK(parse_error(k_abc + "  bin//k3s\n") == invalid(1, "file name 'bin//k3s' has an empty component"));
  CHECK(parse_error(k_abc + "  bin/\n") == invalid(1, "file name 'bin/' has an empty component"));
}

TEST_CASE("a file name listed twice in SHA256SUMS is refused, naming both lines", "[core][checksums]") {
  CHECK(parse_error(k_abc + "  bin/k3s\n" + k_hello + "  etc/a\n" + k_abc + " *bin/k3s\n") ==
        invalid(3, "duplicate file name 'bin/k3s' (first on line 1)"));
}

TEST_CASE("sha256sum's backslash-escaped lines are refused with their own reason", "[core][checksums]") {
  CHECK(parse_error("\\" + k_abc + "  a\\nb\n") ==
        invalid(1, "escaped file names (a line starting with '\\') are not supported"));
}

TEST_CASE("a SHA256SUMS without entries is refused", "[core][checksums]") {
  CHECK(parse_error("") == "invalid SHA256SUMS '/payload/SHA256SUMS': no entries");
}

TEST_CASE("Sha256Sums::load parses a file and names it in errors", "[core][checksums]") {
  hoist::test::ScopedTempDir dir;
  const fs::path path = dir.path() / "SHA256SUMS";
  write_file(path, k_abc + "  bin/k3s\n");
  const Sha256Sums sums = Sha256Sums::load(path);
  CHECK(sums.expected_for("bin/k3s") == k_abc);
  CHECK(sums.source() == path.string());

  write_file(path, k_abc + "  bin/k3s\nnot a line\n");
  const Error e = thrown_by([&] { (void)Sha256Sums::load(path); });
  CHECK(e.code() == ExitCode::verification);
  CHECK(std::string(e.what()) == "invalid SHA256SUMS '" + path.string() + "' line 2: expected 64 hex digits");
}

TEST_CASE("Sha256Sums::load of a missing file or a directory is a usage error naming the path", "[core][checksums]") {
  hoist::test::ScopedTempDir dir;
  const Error missing = thrown_by([&] { (void)Sha256Sums::load(dir.path() / "SHA256SUMS"); });
  CHECK(missing.code() == ExitCode::usage);
  CHECK(std::string(missing.what()) ==
        "failed to open '" + (dir.path() / "SHA256SUMS").string() + "': No such file or directory");

  const Error directory = thrown_by([&] { (void)Sha256Sums::load(dir.path()); });
  CHECK(directory.code() == ExitCode::usage);
  CHECK(std::string(directory.what()) ==
        "failed to read '" + dir.path().string() + "': it is a directory, not a regular file");
}

// ---- verify_file ----

TEST_CASE("verify_file accepts a file whose digest is listed", "[core][checksums]") {
  hoist::test::ScopedTempDir dir;
  write_file(dir.path() / "k3s", "k3s binary\n");
  const Sha256Sums sums = Sha256Sums::parse(k_k3s + "  bin/k3s\n", k_source);
  CHECK_NOTHROW(verify_file(sums, "bin/k3s", dir.path() / "k3s"));
}

TEST_CASE("verify_file refuses a changed file with both digests", "[core][checksums]") {
  hoist::test::ScopedTempDir dir;
  write_file(dir.path() / "k3s", "hello\n");
  const Sha256Sums sums = Sha256Sums::parse(k_k3s + "  bin/k3s\n", k_source);
  const Error e = thrown_by([&] { verify_file(sums, "bin/k3s", dir.path() / "k3s"); });
  CHECK(e.code() == ExitCode::verification);
  CHECK(std::string(e.what()) == "checksum mismatch for 'bin/k3s': expected " + k_k3s + ", got " + k_hello);
}

TEST_CASE("verify_file refuses a name that SHA256SUMS does not list", "[core][checksums]") {
  hoist::test::ScopedTempDir dir;
  write_file(dir.path() / "k3s", "k3s binary\n");
  const Sha256Sums sums = Sha256Sums::parse(k_k3s + "  bin/k3s\n", k_source);
  const Error e = thrown_by([&] { verify_file(sums, "bin/kubectl", dir.path() / "k3s"); });
  CHECK(e.code() == ExitCode::verification);
  CHECK(std::string(e.what()) == "'bin/kubectl' is not listed in SHA256SUMS '/payload/SHA256SUMS'");
}

TEST_CASE("verify_file of an unreadable file fails naming it", "[core][checksums]") {
  hoist::test::ScopedTempDir dir;
  const Sha256Sums sums = Sha256Sums::parse(k_k3s + "  bin/k3s\n", k_source);
  const Error e = thrown_by([&] { verify_file(sums, "bin/k3s", dir.path() / "k3s"); });
  CHECK(e.code() == ExitCode::failed);
  CHECK(std::string(e.what()) == "failed to open '" + (dir.path() / "k3s").string() + "': No such file or directory");
}

// ---- streaming ----

TEST_CASE("Sha256Verifier passes a payload that matches SHA256SUMS in any order", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  bin/k3s\n" + k_hello + "  etc/hello\n", k_source);
  Sha256Verifier verifier(sums);
  CHECK(verifier.expect("etc/hello"));
  CHECK(verifier.expect("bin/k3s"));
  CHECK_FALSE(verifier.expect("SHA256SUMS"));
  verifier.check("etc/hello", bytes(k_hello));
  verifier.check("bin/k3s", bytes(k_abc));
  CHECK_NOTHROW(verifier.finish());
}

TEST_CASE("verify_digest compares digests regardless of hex case", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  k3s\n", k_source);
  std::string upper = k_abc;
  for (char& c : upper) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  CHECK_NOTHROW(hoist::verify_digest(sums, "k3s", upper));
}

TEST_CASE("Sha256Verifier refuses a payload file whose digest differs", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  bin/k3s\n", k_source);
  Sha256Verifier verifier(sums);
  const Error e = thrown_by([&] { verifier.check("bin/k3s", bytes(k_hello)); });
  CHECK(e.code() == ExitCode::verification);
  CHECK(std::string(e.what()) == "checksum mismatch for 'bin/k3s': expected " + k_abc + ", got " + k_hello);
}

TEST_CASE("Sha256Verifier names both digests in hex and counts a refused name as unseen", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  bin/k3s\n" + k_hello + "  etc/hello\n", k_source);
  Sha256Verifier verifier(sums);
  CHECK_NOTHROW(verifier.check("bin/k3s", bytes(k_abc)));
  const Error e = thrown_by([&] { verifier.check("etc/hello", bytes(k_abc)); });
  CHECK(e.code() == ExitCode::verification);
  CHECK(std::string(e.what()) == "checksum mismatch for 'etc/hello': expected " + k_hello + ", got " + k_abc);
  const Error unlisted = thrown_by([&] { verifier.check("bin/evil", bytes(k_abc)); });
  CHECK(std::string(unlisted.what()) == "'bin/evil' is not listed in SHA256SUMS '/payload/SHA256SUMS'");
  // A name checked by its bytes counts as seen: only etc/hello, which failed, is missing.
  const Error missing = thrown_by([&] { verifier.finish(); });
  CHECK(std::string(missing.what()).starts_with("'etc/hello' is listed in SHA256SUMS but not in the payload"));
}

TEST_CASE("Sha256Verifier refuses a second copy of a name that does not match", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  bin/k3s\n", k_source);
  Sha256Verifier verifier(sums);
  verifier.check("bin/k3s", bytes(k_abc));
  const Error e = thrown_by([&] { verifier.check("bin/k3s", bytes(k_hello)); });
  CHECK(std::string(e.what()) == "checksum mismatch for 'bin/k3s': expected " + k_abc + ", got " + k_hello);
}

TEST_CASE("Sha256Verifier refuses a payload file that is not listed", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  bin/k3s\n", k_source);
  Sha256Verifier verifier(sums);
  const Error e = thrown_by([&] { verifier.check("bin/evil", bytes(k_abc)); });
  CHECK(e.code() == ExitCode::verification);
  CHECK(std::string(e.what()) == "'bin/evil' is not listed in SHA256SUMS '/payload/SHA256SUMS'");
}

TEST_CASE("Sha256Verifier::finish refuses a payload missing a listed file", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  bin/k3s\n" + k_hello + "  etc/hello\n", k_source);
  Sha256Verifier verifier(sums);
  verifier.check("etc/hello", bytes(k_hello));
  const Error e = thrown_by([&] { verifier.finish(); });
  CHECK(e.code() == ExitCode::verification);
  CHECK(std::string(e.what()) == "'bin/k3s' is listed in SHA256SUMS but not in the payload");
}

TEST_CASE("Sha256Verifier::check_listed checks the listing alone", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  bin/k3s\n" + k_hello + "  etc/hello\n", k_source);
  Sha256Verifier verifier(sums);
  verifier.check_listed("etc/hello");
  CHECK(std::string(thrown_by([&] { verifier.finish(); }).what()) ==
        "'bin/k3s' is listed in SHA256SUMS but not in the payload");
  CHECK(std::string(thrown_by([&] { verifier.check_listed("bin/evil"); }).what()) ==
        "'bin/evil' is not listed in SHA256SUMS '/payload/SHA256SUMS'");
  verifier.check_listed("bin/k3s");
  verifier.finish();
}

TEST_CASE("Sha256Verifier::finish counts the other missing files", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  c\n" + k_hello + "  a\n" + k_k3s + "  b\n", k_source);
  const Sha256Verifier verifier(sums);
  const Error e = thrown_by([&] { verifier.finish(); });
  CHECK(std::string(e.what()) == "'a' is listed in SHA256SUMS but not in the payload (and 2 more)");
}

TEST_CASE("a failed check does not count as the file having appeared", "[core][checksums]") {
  const Sha256Sums sums = Sha256Sums::parse(k_abc + "  bin/k3s\n", k_source);
  Sha256Verifier verifier(sums);
  CHECK_THROWS(verifier.check("bin/k3s", bytes(k_hello)));
  const Error e = thrown_by([&] { verifier.finish(); });
  CHECK(std::string(e.what()) == "'bin/k3s' is listed in SHA256SUMS but not in the payload");
}

// ---- signatures ----

namespace {

/// A temp dir with a SHA256SUMS and key pairs made by the real openssl CLI, the
/// way the README tells users to make them.
class SigningDir {
 public:
  SigningDir() { write_file(sums(), k_k3s + "  bin/k3s\n" + k_hello + "  etc/hello\n"); }
  [[nodiscard]] fs::path path(const std::string& name) const { return m_dir.path() / name; }
  [[nodiscard]] fs::path sums() const { return path("SHA256SUMS"); }

  /// openssl genpkey for `algorithm_args`, then the public half with `openssl pkey -pubout`.
  void make_key(const std::string& name, const std::string& algorithm_args) {
    run("openssl genpkey -quiet " + algorithm_args + " -out '" + path(name + ".pem").string() + "'");
    run("openssl pkey -in '" + path(name + ".pem").string() + "' -pubout -out '" + path(name + ".pub.pem").string() +
        "'");
  }
  void make_ed25519(const std::string& name) { make_key(name, "-algorithm ed25519"); }
  void make_p256(const std::string& name) { make_key(name, "-algorithm EC -pkeyopt ec_paramgen_curve:P-256"); }

  void sign_ed25519(const std::string& key, const std::string& out) {
    run("openssl pkeyutl -sign -rawin -inkey '" + path(key + ".pem").string() + "' -in '" + sums().string() +
        "' -out '" + path(out).string() + "'");
  }
  void sign_p256(const std::string& key, const std::string& out) {
    run("openssl dgst -sha256 -sign '" + path(key + ".pem").string() + "' -out '" + path(out).string() + "' '" +
        sums().string() + "'");
  }
  void to_base64(const std::string& in, const std::string& out) {
    run("openssl base64 -in '" + path(in).string() + "' -out '" + path(out).string() + "'");
  }
  /// Flips one bit of one byte of SHA256SUMS, as a tampering mirror would.
  void tamper_with_sums() {
    std::string text = read_file(sums());
    text[10] = static_cast<char>(text[10] ^ 0x01);
    write_file(sums(), text);
  }

  [[nodiscard]] std::string does_not_verify(const std::string& key) const {
    return "signature of '" + sums().string() + "' does not verify with public key '" +
           path(key + ".pub.pem").string() + "'";
  }

 private:
  hoist::test::ScopedTempDir m_dir;
};

}  // namespace

TEST_CASE("an Ed25519 signature made with openssl pkeyutl -rawin verifies", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_ed25519("ed");
  dir.sign_ed25519("ed", "SHA256SUMS.sig");
  CHECK(fs::file_size(dir.path("SHA256SUMS.sig")) == 64);
  CHECK_NOTHROW(verify_signature(dir.sums(), dir.path("SHA256SUMS.sig"), dir.path("ed.pub.pem")));
}

TEST_CASE("an ECDSA P-256 signature made with openssl dgst -sha256 -sign verifies", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_p256("ec");
  dir.sign_p256("ec", "SHA256SUMS.sig");
  CHECK_NOTHROW(verify_signature(dir.sums(), dir.path("SHA256SUMS.sig"), dir.path("ec.pub.pem")));
}

TEST_CASE("a base64 signature is accepted, wrapped or on one line", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_ed25519("ed");
  dir.make_p256("ec");
  dir.sign_ed25519("ed", "ed.sig");
  dir.sign_p256("ec", "ec.sig");
  // openssl base64 wraps at 64 columns, so the 88 characters of an Ed25519 signature span two lines.
  dir.to_base64("ed.sig", "ed.sig.b64");
  dir.to_base64("ec.sig", "ec.sig.b64");
  run("base64 -w0 '" + dir.path("ed.sig").string() + "' > '" + dir.path("ed.sig.b64-oneline").string() + "'");
  CHECK(read_file(dir.path("ed.sig.b64")).find('\n') < 88);

  CHECK_NOTHROW(verify_signature(dir.sums(), dir.path("ed.sig.b64"), dir.path("ed.pub.pem")));
  CHECK_NOTHROW(verify_signature(dir.sums(), dir.path("ed.sig.b64-oneline"), dir.path("ed.pub.pem")));
  CHECK_NOTHROW(verify_signature(dir.sums(), dir.path("ec.sig.b64"), dir.path("ec.pub.pem")));
}

TEST_CASE("a signature over SHA256SUMS fails once one byte of SHA256SUMS changes", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_ed25519("ed");
  dir.make_p256("ec");
  dir.sign_ed25519("ed", "ed.sig");
  dir.sign_p256("ec", "ec.sig");
  dir.to_base64("ed.sig", "ed.sig.b64");
  dir.tamper_with_sums();

  for (const auto& [sig_name, key_name] : {std::pair{"ed.sig", "ed"}, {"ec.sig", "ec"}, {"ed.sig.b64", "ed"}}) {
    // clang 14 cannot capture structured bindings in a lambda.
    const std::string sig = sig_name;
    const std::string key = key_name;
    INFO(sig);
    const Error e = thrown_by([&] { verify_signature(dir.sums(), dir.path(sig), dir.path(key + ".pub.pem")); });
    CHECK(e.code() == ExitCode::verification);
    CHECK(std::string(e.what()) == dir.does_not_verify(key));
  }
}

TEST_CASE("a signature made with another key does not verify", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_ed25519("ed");
  dir.make_ed25519("ed-other");
  dir.make_p256("ec");
  dir.make_p256("ec-other");
  dir.sign_ed25519("ed", "ed.sig");
  dir.sign_p256("ec", "ec.sig");

  for (const auto& [sig_name, key_name] :
       {std::pair{"ed.sig", "ed-other"}, {"ec.sig", "ec-other"}, {"ed.sig", "ec"}, {"ec.sig", "ed"}}) {
    // clang 14 cannot capture structured bindings in a lambda.
    const std::string sig = sig_name;
    const std::string key = key_name;
    INFO(sig << " with " << key);
    const Error e = thrown_by([&] { verify_signature(dir.sums(), dir.path(sig), dir.path(key + ".pub.pem")); });
    CHECK(e.code() == ExitCode::verification);
    CHECK(std::string(e.what()) == dir.does_not_verify(key));
  }
}

TEST_CASE("an empty or garbage signature does not verify", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_ed25519("ed");
  write_file(dir.path("empty.sig"), "");
  write_file(dir.path("text.sig"), "this is not a signature\n");
  write_file(dir.path("b64.sig"), "AAAA\n");
  for (const char* sig : {"empty.sig", "text.sig", "b64.sig"}) {
    INFO(sig);
    const Error e = thrown_by([&] { verify_signature(dir.sums(), dir.path(sig), dir.path("ed.pub.pem")); });
    CHECK(e.code() == ExitCode::verification);
    CHECK(std::string(e.what()) == dir.does_not_verify("ed"));
  }
}

TEST_CASE("an RSA public key is refused as unsupported, with exit code 2", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_key("rsa", "-algorithm RSA -pkeyopt rsa_keygen_bits:2048");
  run("openssl dgst -sha256 -sign '" + dir.path("rsa.pem").string() + "' -out '" + dir.path("rsa.sig").string() +
      "' '" + dir.sums().string() + "'");
  const Error e = thrown_by([&] { verify_signature(dir.sums(), dir.path("rsa.sig"), dir.path("rsa.pub.pem")); });
  CHECK(e.code() == ExitCode::usage);
  CHECK(std::string(e.what()) ==
        "unsupported public key '" + dir.path("rsa.pub.pem").string() + "': RSA (supported: Ed25519, ECDSA P-256)");
}

TEST_CASE("an EC public key on a curve other than P-256 is refused as unsupported", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_key("p384", "-algorithm EC -pkeyopt ec_paramgen_curve:P-384");
  dir.sign_p256("p384", "p384.sig");
  const Error e = thrown_by([&] { verify_signature(dir.sums(), dir.path("p384.sig"), dir.path("p384.pub.pem")); });
  CHECK(e.code() == ExitCode::usage);
  CHECK(std::string(e.what()) == "unsupported public key '" + dir.path("p384.pub.pem").string() +
                                     "': EC on curve secp384r1 (supported: Ed25519, ECDSA P-256)");
}

TEST_CASE("a private key given as the public key is refused", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_ed25519("ed");
  dir.sign_ed25519("ed", "ed.sig");
  const Error e = thrown_by([&] { verify_signature(dir.sums(), dir.path("ed.sig"), dir.path("ed.pem")); });
  CHECK(e.code() == ExitCode::usage);
  CHECK(std::string(e.what()) == "failed to read public key '" + dir.path("ed.pem").string() +
                                     "': no PEM 'PUBLIC KEY' block (write one with 'openssl pkey -in KEY -pubout')");
}

TEST_CASE("a corrupt PEM public key is refused with OpenSSL's reason", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_ed25519("ed");
  dir.sign_ed25519("ed", "ed.sig");
  write_file(dir.path("bad.pub.pem"), "-----BEGIN PUBLIC KEY-----\nAAAAAAAA\n-----END PUBLIC KEY-----\n");
  const Error e = thrown_by([&] { verify_signature(dir.sums(), dir.path("ed.sig"), dir.path("bad.pub.pem")); });
  CHECK(e.code() == ExitCode::usage);
  // The reason in parentheses is OpenSSL's and varies across its versions ("unsupported" in 3.0).
  const std::string prefix =
      "failed to read public key '" + dir.path("bad.pub.pem").string() + "': not a valid PEM public key (OpenSSL: ";
  CHECK_THAT(std::string(e.what()), Catch::StartsWith(prefix) && Catch::EndsWith(")"));
}

TEST_CASE("an unreadable SHA256SUMS, signature or key is a usage error naming it", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_ed25519("ed");
  dir.sign_ed25519("ed", "ed.sig");
  const std::string enoent = "': No such file or directory";

  const Error sums = thrown_by([&] { verify_signature(dir.path("nope"), dir.path("ed.sig"), dir.path("ed.pub.pem")); });
  CHECK(sums.code() == ExitCode::usage);
  CHECK(std::string(sums.what()) == "failed to open '" + dir.path("nope").string() + enoent);

  const Error sig = thrown_by([&] { verify_signature(dir.sums(), dir.path("nope.sig"), dir.path("ed.pub.pem")); });
  CHECK(sig.code() == ExitCode::usage);
  CHECK(std::string(sig.what()) == "failed to open '" + dir.path("nope.sig").string() + enoent);

  const Error key = thrown_by([&] { verify_signature(dir.sums(), dir.path("ed.sig"), dir.path("nope.pem")); });
  CHECK(key.code() == ExitCode::usage);
  CHECK(std::string(key.what()) == "failed to open '" + dir.path("nope.pem").string() + enoent);
}

TEST_CASE("load_verified parses the SHA256SUMS whose signature it verified", "[core][checksums][signature]") {
  SigningDir dir;
  dir.make_p256("ec");
  dir.sign_p256("ec", "ec.sig");
  const Sha256Sums sums = load_verified(dir.sums(), dir.path("ec.sig"), dir.path("ec.pub.pem"));
  CHECK(sums.expected_for("bin/k3s") == k_k3s);
  CHECK(sums.source() == dir.sums().string());

  dir.tamper_with_sums();
  const Error e = thrown_by([&] { (void)load_verified(dir.sums(), dir.path("ec.sig"), dir.path("ec.pub.pem")); });
  CHECK(e.code() == ExitCode::verification);
  CHECK(std::string(e.what()) == dir.does_not_verify("ec"));
}

}  // namespace hoist
