// Each @system wrapper links and its library answers: the targets later code
// relies on (gRPC reflection and health checking, Gloo, SQLite, yaml-cpp,
// cpp-httplib, CLI11, zlib, libcrypto, OpenBLAS) are usable as declared.
#include <cblas.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <zlib.h>

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "gloo/transport/tcp/device.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "yaml-cpp/yaml.h"

namespace {

TEST(SystemLibsTest, SqliteOpensAnInMemoryDatabase) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (42);", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  EXPECT_GE(sqlite3_libversion_number(), 3040000);
}

TEST(SystemLibsTest, GlooCreatesALoopbackTcpDevice) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  ASSERT_NE(device, nullptr);
  EXPECT_NE(device->str().find("127.0.0.1"), std::string::npos) << device->str();
}

TEST(SystemLibsTest, GrpcServerWithHealthAndReflection) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  EXPECT_GT(port, 0);
  ASSERT_NE(server->GetHealthCheckService(), nullptr);
  server->Shutdown();
}

TEST(SystemLibsTest, YamlCliHttplibZlibCryptoBlas) {
  YAML::Node node = YAML::Load("a: [1, 2]");
  EXPECT_EQ(node["a"][1].as<int>(), 2);

  CLI::App app;
  int n = 0;
  app.add_option("--n", n);
  const char* argv[] = {"prog", "--n", "7"};
  app.parse(3, const_cast<char**>(argv));
  EXPECT_EQ(n, 7);

  httplib::Server http;
  EXPECT_FALSE(http.is_running());

  EXPECT_EQ(crc32(0, reinterpret_cast<const Bytef*>("abc"), 3), 0x352441c2u);

  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ASSERT_EQ(EVP_Digest("abc", 3, digest, &len, EVP_sha256(), nullptr), 1);
  EXPECT_EQ(len, 32u);
  EXPECT_EQ(digest[0], 0xba);  // SHA-256("abc") = ba7816bf...

  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {0, 0, 0, 0};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  EXPECT_EQ(c[0], 19.0f);
  EXPECT_EQ(c[3], 50.0f);
}

}  // namespace
