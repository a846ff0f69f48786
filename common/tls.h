#ifndef RINGMASTER_COMMON_TLS_H_
#define RINGMASTER_COMMON_TLS_H_

// TLS material and the checks Ringmaster makes itself (no gRPC here; the
// credentials built from it are in common/grpc_security.h).
//
//   - LoadTlsMaterial reads a CA bundle, a certificate and its key (PEM),
//     checks that they parse and that the key belongs to the certificate,
//     and that the key file is private (no group/other permissions).
//   - VerifyPeerCertificate checks a peer's certificate against the CA at a
//     given time, for a purpose (a worker's client certificate: clientAuth).
//     The coordinator accepts any client certificate in the TLS handshake
//     and verifies it here, so that a bad one is an UNAUTHENTICATED RPC with
//     the reason ("expired", "not issued by the cluster CA") instead of a
//     handshake the client only sees as UNAVAILABLE. The handshake itself
//     still proves the peer holds the certificate's key.
//   - ReadSecretFile reads a token file (first line, whitespace trimmed) and
//     refuses one that group or others can read.
//   - Sha256Hex and ConstantTimeEquals for tokens and secrets.
//
// Thread-safe (pure functions).

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringmaster {

// Paths given on a command line; all empty: TLS is off.
struct TlsFiles {
  std::string ca_file;    // PEM CA bundle that peers' certificates must chain to
  std::string cert_file;  // this process's certificate (PEM)
  std::string key_file;   // its private key (PEM), mode 0600
  bool any() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
};

struct TlsMaterial {
  std::string ca_pem;
  std::string cert_pem;  // empty: no identity (a CLI)
  std::string key_pem;
};

enum class PeerPurpose { kClient, kServer };

// Reads and checks `files`. `require_identity`: the certificate and key are
// required (servers, workers); otherwise both or neither. INVALID_ARGUMENT
// naming the flag/file and the reason; NOT_FOUND for a missing file;
// PERMISSION_DENIED for a key readable by group or others.
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files, bool require_identity);

// OK if `cert_pem` (the leaf, optionally followed by intermediates) chains
// to `ca_pem`, is valid at `now` and may be used for `purpose`; otherwise
// UNAUTHENTICATED with the reason ("client certificate expired at ...").
absl::Status VerifyPeerCertificate(const std::string& cert_pem, const std::string& ca_pem, absl::Time now,
                                   PeerPurpose purpose);

// The certificate's subject common name (diagnostics); empty if none.
std::string CertificateCommonName(const std::string& cert_pem);

// The first line of `path`, whitespace trimmed. `what` names it in errors
// ("--join-token-file"). PERMISSION_DENIED if group or others may read it;
// INVALID_ARGUMENT if it is empty.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what);

// Checks that `path` is a regular file the group and others cannot read.
absl::Status CheckPrivateFile(const std::string& path, const std::string& what);

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

// a == b, in time that depends only on the lengths.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// `bytes` random bytes from the OS CSPRNG, hex encoded.
absl::StatusOr<std::string> RandomHex(size_t bytes);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_TLS_H_
