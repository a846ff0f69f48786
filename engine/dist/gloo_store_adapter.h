#ifndef RINGMASTER_ENGINE_DIST_GLOO_STORE_ADAPTER_H_
#define RINGMASTER_ENGINE_DIST_GLOO_STORE_ADAPTER_H_

// GlooStoreAdapter: our dist::Store seen as the gloo::rendezvous::Store that
// gloo::rendezvous::Context::connectFullMesh uses, with every key under
// `prefix` + "/". Gloo expects get() to block until the key exists; here get
// and wait block up to `timeout`.
//
// Gloo's interface returns no status, so a failure is thrown as a
// gloo::IoException — the one place our code throws, always inside a Gloo
// call that GlooProcessGroup wraps in try/catch. The first failure's
// absl::Status (code and message intact) is kept in error() so the caller
// reports it instead of the exception text.
//
// Thread-compatible (Gloo calls it from the connecting thread only).

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/dist/store.h"
#include "gloo/rendezvous/store.h"

namespace ringmaster::engine::dist {

class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(dist::Store& store, std::string prefix, absl::Duration timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The first error of the store, OK if none.
  const absl::Status& error() const { return error_; }

 private:
  std::string Key(const std::string& key) const { return prefix_ + "/" + key; }
  // Records `status` and throws it as a gloo::IoException.
  [[noreturn]] void Throw(const absl::Status& status);

  dist::Store& store_;
  const std::string prefix_;
  const absl::Duration timeout_;
  absl::Status error_;
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_GLOO_STORE_ADAPTER_H_
