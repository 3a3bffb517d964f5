#pragma once

// Internal to the sys room, the only one that calls OpenSSL: owning pointers for
// the OpenSSL objects hoist creates, and the text of OpenSSL's errors.

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <string_view>

namespace hoist {

struct BioFree {
  void operator()(BIO* bio) const noexcept { BIO_free(bio); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const noexcept { EVP_PKEY_free(key); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const noexcept { EVP_MD_CTX_free(ctx); }
};
struct X509Free {
  void operator()(X509* cert) const noexcept { X509_free(cert); }
};

using BioPtr = std::unique_ptr<BIO, BioFree>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;

/// Which error of the thread's OpenSSL queue a message names.
enum class OpenSslError {
  oldest,  ///< the root cause (later entries are the callers that passed it up)
  newest,  ///< the last one queued (what the TLS calls report)
};

/// The reason of error `which` in this thread's OpenSSL queue, `none` when the
/// queue is empty; the queue is empty afterwards.
std::string openssl_error_text(OpenSslError which, std::string_view none);

}  // namespace hoist
