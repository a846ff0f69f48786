#include "common/tls.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/dev_ca_for_test.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

using ::ringmaster::testing::MakeDevCa;
using ::ringmaster::testing::ReadFileOrDie;

std::string WriteFile(const std::string& name, const std::string& text, mode_t mode) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path, std::ios::trunc) << text;
  chmod(path.c_str(), mode);
  return path;
}

TEST(TlsTest, LoadsMatchingCertificateAndKey) {
  const std::string ca = MakeDevCa("load");
  absl::StatusOr<TlsMaterial> tls =
      LoadTlsMaterial({ca + "/ca.crt", ca + "/worker.crt", ca + "/worker.key"}, /*require_identity=*/true);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_EQ(tls->ca_pem, ReadFileOrDie(ca + "/ca.crt"));
  EXPECT_EQ(CertificateCommonName(tls->cert_pem), "ringmaster-worker");
}

TEST(TlsTest, RejectsKeyOfAnotherCertificate) {
  const std::string ca = MakeDevCa("mismatch");
  absl::StatusOr<TlsMaterial> tls = LoadTlsMaterial({ca + "/ca.crt", ca + "/worker.crt", ca + "/coordinator.key"}, true);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tls.status().message().find("is not the key of the certificate"), std::string::npos) << tls.status();
}

TEST(TlsTest, RejectsKeyReadableByOthers) {
  const std::string ca = MakeDevCa("perm");
  ASSERT_EQ(chmod((ca + "/worker.key").c_str(), 0644), 0);
  absl::StatusOr<TlsMaterial> tls = LoadTlsMaterial({ca + "/ca.crt", ca + "/worker.crt", ca + "/worker.key"}, true);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(tls.status().message().find("chmod 600"), std::string::npos) << tls.status();
}

TEST(TlsTest, RequiresIdentityWhenAskedAndCaAlways) {
  EXPECT_EQ(LoadTlsMaterial({"ca.crt", "", ""}, true).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadTlsMaterial({"", "a.crt", "a.key"}, false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadTlsMaterial({"/nonexistent/ca.crt", "", ""}, false).status().code(), absl::StatusCode::kNotFound);
  const std::string ca = MakeDevCa("ca-only");
  absl::StatusOr<TlsMaterial> cli = LoadTlsMaterial({ca + "/ca.crt", "", ""}, false);
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_TRUE(cli->cert_pem.empty());
}

TEST(TlsTest, VerifiesClientCertificates) {
  const std::string ca = MakeDevCa("verify");
  const std::string other = MakeDevCa("verify-other");
  const std::string ca_pem = ReadFileOrDie(ca + "/ca.crt");
  const absl::Time now = absl::Now();
  EXPECT_TRUE(VerifyPeerCertificate(ReadFileOrDie(ca + "/worker.crt"), ca_pem, now, PeerPurpose::kClient).ok());

  absl::Status expired =
      VerifyPeerCertificate(ReadFileOrDie(ca + "/worker-expired.crt"), ca_pem, now, PeerPurpose::kClient);
  EXPECT_EQ(expired.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(expired.message().find("client certificate expired at"), std::string::npos) << expired;

  absl::Status foreign = VerifyPeerCertificate(ReadFileOrDie(other + "/worker.crt"), ca_pem, now, PeerPurpose::kClient);
  EXPECT_EQ(foreign.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(foreign.message().find("not issued by the cluster CA"), std::string::npos) << foreign;

  absl::Status early = VerifyPeerCertificate(ReadFileOrDie(ca + "/worker.crt"), ca_pem,
                                             now - absl::Hours(24 * 365 * 5), PeerPurpose::kClient);
  EXPECT_EQ(early.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(early.message().find("not valid before"), std::string::npos) << early;

  absl::Status none = VerifyPeerCertificate("", ca_pem, now, PeerPurpose::kClient);
  EXPECT_EQ(none.code(), absl::StatusCode::kUnauthenticated);
}

TEST(TlsTest, ServerCertificateIsNotAClientCertificate) {
  const std::string ca = MakeDevCa("purpose");
  const std::string ca_pem = ReadFileOrDie(ca + "/ca.crt");
  absl::Status s =
      VerifyPeerCertificate(ReadFileOrDie(ca + "/coordinator.crt"), ca_pem, absl::Now(), PeerPurpose::kClient);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_TRUE(
      VerifyPeerCertificate(ReadFileOrDie(ca + "/coordinator.crt"), ca_pem, absl::Now(), PeerPurpose::kServer).ok());
}

TEST(TlsTest, SecretFilesMustBePrivateAndNonEmpty) {
  absl::StatusOr<std::string> ok = ReadSecretFile(WriteFile("good", "  s3cret-token \nignored\n", 0600), "--x");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, "s3cret-token");
  absl::StatusOr<std::string> open = ReadSecretFile(WriteFile("open", "s3cret\n", 0644), "--x");
  EXPECT_EQ(open.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(open.status().message().find("s3cret"), std::string::npos) << "the secret must not be in the error";
  EXPECT_EQ(ReadSecretFile(WriteFile("empty", "\n", 0600), "--x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadSecretFile("/nonexistent/file", "--x").status().code(), absl::StatusCode::kNotFound);
}

TEST(TlsTest, HashAndCompare) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  absl::StatusOr<std::string> a = RandomHex(32);
  absl::StatusOr<std::string> b = RandomHex(32);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace ringmaster
