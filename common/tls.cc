#include "common/tls.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct StoreFree {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
struct StackFree {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;

std::unique_ptr<BIO, BioFree> MemBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every certificate in `pem`, in order.
std::vector<X509Ptr> ParseCertificates(const std::string& pem) {
  std::vector<X509Ptr> out;
  auto bio = MemBio(pem);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(cert);
  ERR_clear_error();  // the read that ended the loop
  return out;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    if (error == ENOENT) return absl::NotFoundError(absl::StrCat(what, ": ", path, " does not exist"));
    return absl::PermissionDeniedError(absl::StrCat(what, ": cannot read ", path, ": ", std::strerror(error)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Iso(const ASN1_TIME* t) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), t);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace

absl::Status CheckPrivateFile(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(what, ": ", path, " does not exist"));
    return absl::PermissionDeniedError(absl::StrCat(what, ": cannot stat ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(what, ": ", path, " is not a file"));
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(what, ": ", path, " is readable by group or others (mode ",
                                                    absl::StrFormat("%03o", st.st_mode & 0777),
                                                    "); restrict it with chmod 600"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files, bool require_identity) {
  if (files.ca_file.empty()) return absl::InvalidArgumentError("--tls-ca: required with TLS");
  if (require_identity && (files.cert_file.empty() || files.key_file.empty())) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key: both required with TLS");
  }
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key: give both or neither");
  }
  TlsMaterial out;
  ASSIGN_OR_RETURN(out.ca_pem, ReadFile(files.ca_file, "--tls-ca"));
  if (ParseCertificates(out.ca_pem).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-ca: ", files.ca_file, " holds no PEM certificate"));
  }
  if (files.cert_file.empty()) return out;
  ASSIGN_OR_RETURN(out.cert_pem, ReadFile(files.cert_file, "--tls-cert"));
  RETURN_IF_ERROR(CheckPrivateFile(files.key_file, "--tls-key"));
  ASSIGN_OR_RETURN(out.key_pem, ReadFile(files.key_file, "--tls-key"));
  std::vector<X509Ptr> certs = ParseCertificates(out.cert_pem);
  if (certs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert: ", files.cert_file, " holds no PEM certificate"));
  }
  auto key_bio = MemBio(out.key_pem);
  std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-key: ", files.key_file, " holds no PEM private key"));
  }
  if (X509_check_private_key(certs.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key: ", files.key_file, " is not the key of the certificate in ", files.cert_file));
  }
  return out;
}

absl::Status VerifyPeerCertificate(const std::string& cert_pem, const std::string& ca_pem, absl::Time now,
                                   PeerPurpose purpose) {
  const char* who = purpose == PeerPurpose::kClient ? "client certificate" : "server certificate";
  std::vector<X509Ptr> chain = ParseCertificates(cert_pem);
  if (chain.empty()) return absl::UnauthenticatedError(absl::StrCat("no ", who, " was presented"));
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  for (X509Ptr& ca : ParseCertificates(ca_pem)) X509_STORE_add_cert(store.get(), ca.get());
  std::unique_ptr<STACK_OF(X509), StackFree> intermediates(sk_X509_new_null());
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(intermediates.get(), chain[i].release());
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  if (X509_STORE_CTX_init(ctx.get(), store.get(), chain.front().get(), intermediates.get()) != 1) {
    ERR_clear_error();
    return absl::InternalError("cannot set up certificate verification");
  }
  X509_STORE_CTX_set_time(ctx.get(), 0, absl::ToTimeT(now));
  X509_STORE_CTX_set_purpose(ctx.get(),
                             purpose == PeerPurpose::kClient ? X509_PURPOSE_SSL_CLIENT : X509_PURPOSE_SSL_SERVER);
  const int ok = X509_verify_cert(ctx.get());
  ERR_clear_error();
  if (ok == 1) return absl::OkStatus();
  const int error = X509_STORE_CTX_get_error(ctx.get());
  X509* leaf = chain.front().get();
  switch (error) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return absl::UnauthenticatedError(absl::StrCat(who, " expired at ", Iso(X509_get0_notAfter(leaf))));
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return absl::UnauthenticatedError(absl::StrCat(who, " is not valid before ", Iso(X509_get0_notBefore(leaf))));
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return absl::UnauthenticatedError(absl::StrCat(who, " is not issued by the cluster CA (--tls-ca)"));
    default:
      return absl::UnauthenticatedError(
          absl::StrCat(who, " rejected: ", X509_verify_cert_error_string(error)));
  }
}

std::string CertificateCommonName(const std::string& cert_pem) {
  std::vector<X509Ptr> chain = ParseCertificates(cert_pem);
  if (chain.empty()) return "";
  char cn[256] = {};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(chain.front().get()), NID_commonName, cn, sizeof(cn)) < 0) {
    return "";
  }
  return cn;
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what) {
  RETURN_IF_ERROR(CheckPrivateFile(path, what));
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, what));
  std::string line = text.substr(0, text.find('\n'));
  line = std::string(absl::StripAsciiWhitespace(line));
  if (line.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", path, " is empty"));
  return line;
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

absl::StatusOr<std::string> RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    ERR_clear_error();
    return absl::InternalError("the OS random number generator failed");
  }
  return absl::BytesToHexString(raw);
}

}  // namespace ringmaster
