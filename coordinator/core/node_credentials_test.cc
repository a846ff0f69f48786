// NodeRegistry's node identity: the credential issued at a node's first
// registration (kept only as its SHA-256, in the store too), who may register
// a node again, AuthenticateNode, nodes stored before credentials existed, and
// the binding of a node to its client certificate's identity.
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/tls.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::MakeNode;

bool IsCredential(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

class NodeCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::NewTempDir("credentials") + "/rm.db";
    store_ = *Store::Open({path_});
    registry_ = NewRegistry();
  }

  std::unique_ptr<NodeRegistry> NewRegistry() {
    auto registry = std::make_unique<NodeRegistry>(&clock_, store_.get(), NodeRegistryOptions{absl::Seconds(5), 3});
    EXPECT_TRUE(registry->Recover().ok());
    return registry;
  }

  // A registration of `hostname` naming `node_id`, as a worker's call presenting `proof`.
  absl::StatusOr<NodeRegistration> Register(const std::string& hostname, const std::string& node_id,
                                            const NodeProof& proof) {
    v1::NodeInfo node = MakeNode(hostname, 0, 2);
    node.set_node_id(node_id);
    return registry_->Register(node, {}, false, &proof);
  }

  NodeRegistration MustRegister(const std::string& hostname, const std::string& node_id, const NodeProof& proof) {
    absl::StatusOr<NodeRegistration> r = Register(hostname, node_id, proof);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : NodeRegistration{};
  }

  FakeClock clock_;
  std::string path_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<NodeRegistry> registry_;
};

TEST_F(NodeCredentialsTest, TheFirstRegistrationIssuesACredentialKeptOnlyAsItsHash) {
  NodeRegistration a = MustRegister("host-a", "", {});
  NodeRegistration b = MustRegister("host-b", "", {});
  ASSERT_TRUE(IsCredential(a.credential)) << a.credential;
  EXPECT_NE(a.credential, b.credential);
  EXPECT_EQ(*registry_->AuthenticateNode({a.credential, ""}), a.node_id);
  EXPECT_EQ(*registry_->AuthenticateNode({b.credential, ""}), b.node_id);

  // Stored as its hash; never in what readers get.
  absl::StatusOr<std::vector<v1::NodeInfo>> stored = store_->LoadNodes();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[0].credential_sha256(), Sha256Hex(a.credential));
  EXPECT_EQ((*stored)[0].SerializeAsString().find(a.credential), std::string::npos);
  EXPECT_EQ(registry_->GetNode(a.node_id)->credential_sha256(), "");
  for (const v1::NodeInfo& node : registry_->ListNodes()) EXPECT_EQ(node.credential_sha256(), "");
}

TEST_F(NodeCredentialsTest, AuthenticateNodeNeedsAValidCredential) {
  MustRegister("host-a", "", {});
  absl::StatusOr<std::string> none = registry_->AuthenticateNode({"", ""});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(none.status().message(),
            "no node credential (x-ringmaster-node-credential): a worker gets its node's when it registers");
  absl::StatusOr<std::string> wrong = registry_->AuthenticateNode({std::string(64, 'f'), ""});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(wrong.status().message(), "the node credential is not one of a registered node's; register again");
}

TEST_F(NodeCredentialsTest, OnlyTheCredentialRegistersItsNodeAgain) {
  NodeRegistration a = MustRegister("host-a", "", {});
  NodeRegistration b = MustRegister("host-b", "", {});

  // Its worker: with its id, or with the credential alone; nothing new issued.
  NodeRegistration again = MustRegister("host-a", a.node_id, {a.credential, ""});
  EXPECT_EQ(again.node_id, a.node_id);
  EXPECT_EQ(again.credential, "");
  EXPECT_NE(again.session_id, a.session_id);
  again = MustRegister("renamed", "", {a.credential, ""});
  EXPECT_EQ(again.node_id, a.node_id);
  EXPECT_EQ(registry_->GetNode(a.node_id)->hostname(), "renamed");
  EXPECT_EQ(*registry_->AuthenticateNode({a.credential, ""}), a.node_id) << "still the same credential";

  // Anyone else naming the node.
  absl::StatusOr<NodeRegistration> r = Register("evil", a.node_id, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StartsWith(r.status().message(), "node n-1 has a credential and this registration does not "
                                                     "present it (x-ringmaster-node-credential)"))
      << r.status();
  r = Register("evil", a.node_id, {b.credential, ""});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(r.status().message(), "node.node_id: n-1 is not the node of the credential this call presents (n-2)");
  r = Register("evil", a.node_id, {std::string(64, 'e'), ""});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(registry_->Heartbeat(a.node_id, again.session_id).ok()) << "the worker's session is still current";

  // Its hostname and address without the credential: a new node, with its own.
  NodeRegistration c = MustRegister("renamed", "", {});
  EXPECT_NE(c.node_id, a.node_id);
  EXPECT_TRUE(IsCredential(c.credential));
  // A credential nobody has (a coordinator that lost the node) is no credential.
  NodeRegistration d = MustRegister("host-d", "", {std::string(64, 'e'), ""});
  EXPECT_TRUE(IsCredential(d.credential));

  // In-process callers (nullptr proof) name nodes freely; nothing is reissued.
  v1::NodeInfo trusted = MakeNode("host-a", 0, 2);
  trusted.set_node_id(a.node_id);
  absl::StatusOr<NodeRegistration> t = registry_->Register(trusted);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->credential, "");
  EXPECT_EQ(*registry_->AuthenticateNode({a.credential, ""}), a.node_id);
}

TEST_F(NodeCredentialsTest, CredentialsOutliveACoordinatorRestart) {
  NodeRegistration a = MustRegister("host-a", "", {});
  registry_ = NewRegistry();
  EXPECT_EQ(*registry_->AuthenticateNode({a.credential, ""}), a.node_id);
  EXPECT_EQ(Register("evil", a.node_id, {}).status().code(), absl::StatusCode::kPermissionDenied);
  NodeRegistration again = MustRegister("host-a", a.node_id, {a.credential, ""});
  EXPECT_EQ(again.node_id, a.node_id);
  EXPECT_EQ(again.credential, "");
}

// A node stored by a coordinator of an earlier version has no credential: its
// next registration (trust on first use) issues one, and from then on it is
// needed.
TEST_F(NodeCredentialsTest, ANodeStoredWithoutACredentialGetsOneAtItsNextRegistration) {
  v1::NodeInfo legacy = MakeNode("host-a", 0, 2);
  legacy.set_state(v1::NODE_STATE_READY);
  absl::StatusOr<std::string> id = store_->PutNode(legacy);
  ASSERT_TRUE(id.ok());
  registry_ = NewRegistry();
  NodeRegistration r = MustRegister("host-a", "", {});  // its worker, by hostname and address
  EXPECT_EQ(r.node_id, *id);
  ASSERT_TRUE(IsCredential(r.credential));
  EXPECT_EQ(Register("host-a", *id, {}).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(MustRegister("host-a", *id, {r.credential, ""}).node_id, *id);
}

TEST_F(NodeCredentialsTest, ANodeIsBoundToTheClientCertificateItFirstRegisteredWith) {
  const std::string kCert = "subject=CN=worker-a,O=Ringmaster san=worker-a";
  const std::string kOther = "subject=CN=worker-b,O=Ringmaster san=worker-b";
  NodeRegistration a = MustRegister("host-a", "", {"", kCert});
  EXPECT_EQ(registry_->GetNode(a.node_id)->client_identity(), kCert);
  EXPECT_EQ(*registry_->AuthenticateNode({a.credential, kCert}), a.node_id);

  absl::StatusOr<std::string> stolen = registry_->AuthenticateNode({a.credential, kOther});
  EXPECT_EQ(stolen.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(stolen.status().message(), "node n-1 is bound to the client certificate \"" + kCert +
                                           "\"; this call presents \"" + kOther + "\"");
  stolen = registry_->AuthenticateNode({a.credential, ""});
  EXPECT_EQ(stolen.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::EndsWith(stolen.status().message(), "this call presents no client certificate"));
  absl::StatusOr<NodeRegistration> r = Register("host-a", a.node_id, {a.credential, kOther});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(MustRegister("host-a", a.node_id, {a.credential, kCert}).node_id, a.node_id);

  // Kept across a restart.
  registry_ = NewRegistry();
  EXPECT_EQ(registry_->AuthenticateNode({a.credential, kOther}).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(*registry_->AuthenticateNode({a.credential, kCert}), a.node_id);

  // A node registered without TLS is bound at its first registration with a certificate.
  NodeRegistration b = MustRegister("host-b", "", {});
  EXPECT_EQ(MustRegister("host-b", b.node_id, {b.credential, kOther}).node_id, b.node_id);
  EXPECT_EQ(registry_->GetNode(b.node_id)->client_identity(), kOther);
  EXPECT_EQ(registry_->AuthenticateNode({b.credential, kCert}).status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace ringmaster::coordinator
