#include "engine/dist/gloo_test_util.h"

#include <cstdio>

#include "absl/strings/match.h"

namespace ringmaster::engine::dist {

bool ChildCheck::Expect(bool condition, const std::string& what) {
  if (!condition) {
    ++failures_;
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank_, what.c_str());
  }
  return condition;
}

bool ChildCheck::Ok(const absl::Status& status, const std::string& what) {
  return Expect(status.ok(), what + ": " + status.ToString());
}

bool ChildCheck::IsError(const absl::Status& status, absl::StatusCode code,
                         const std::string& substring, const std::string& what) {
  return Expect(status.code() == code && absl::StrContains(status.message(), substring),
                what + ": expected " + absl::StatusCodeToString(code) + " containing '" +
                    substring + "', got " + status.ToString());
}

std::vector<ChildExit> RunGlooRanks(const GlooTestOptions& options,
                                    const std::function<void(GlooRankContext&)>& body) {
  return RunGlooRanks(options, body, [](ChildProcesses&, Store&) {});
}

std::vector<ChildExit> RunGlooRanks(const GlooTestOptions& options,
                                    const std::function<void(GlooRankContext&)>& body,
                                    const std::function<void(ChildProcesses&, Store&)>& parent) {
  TcpStoreOptions server_options;
  server_options.start_server = true;
  auto parent_store = TcpStore::Connect(server_options);
  if (!parent_store.ok()) {
    std::fprintf(stderr, "cannot start the store: %s\n", parent_store.status().ToString().c_str());
    return {};
  }
  const int port = (*parent_store)->port();
  ChildProcesses children(options.size, [&](int rank) {
    TcpStoreOptions client;
    client.port = port;
    auto store = TcpStore::Connect(client);
    if (!store.ok()) {
      std::fprintf(stderr, "rank %d: store: %s\n", rank, store.status().ToString().c_str());
      return 3;
    }
    GlooOptions gloo;
    gloo.rank = rank;
    gloo.size = options.size;
    gloo.timeout = options.timeout;
    gloo.key_prefix = options.key_prefix;
    gloo.check_calls = options.check_calls;
    auto group = GlooProcessGroup::Create(**store, gloo);
    if (!group.ok()) {
      std::fprintf(stderr, "rank %d: group: %s\n", rank, group.status().ToString().c_str());
      return 3;
    }
    ChildCheck check(rank);
    GlooRankContext context{rank, **group, **store, check};
    body(context);
    return check.ExitCode();
  });
  parent(children, **parent_store);
  return children.WaitAll(options.limit);
}

}  // namespace ringmaster::engine::dist
