#pragma once

// Owning pointers for the OpenSSL objects hoist creates.

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>

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

}  // namespace hoist
