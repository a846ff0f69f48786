#ifndef RINGMASTER_COORDINATOR_NODE_STORE_WRITER_H_
#define RINGMASTER_COORDINATOR_NODE_STORE_WRITER_H_

// NodeStoreWriter: group commit of node rows. Put() returns once the node's
// row is durable, as Store::PutNode does, but the rows of concurrent callers
// share one transaction and so one fsync: while one transaction commits, the
// rows that arrive queue, and the first of their callers to run next writes
// them all together. A burst of registrations then costs a few fsyncs rather
// than one each (at 2,048 nodes, one each was most of a second on its own).
//
// A batch that fails is written again row by row, so that a row's error is
// its own caller's only. No thread of its own: a caller writes. Thread-safe.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/store/store.h"
#include "proto/node.pb.h"

namespace ringmaster::coordinator {

class NodeStoreWriter {
 public:
  // `store` must outlive the writer.
  explicit NodeStoreWriter(Store* store) : store_(store) {}

  // Store::PutNode's contract: the node's id once its row is committed.
  absl::StatusOr<std::string> Put(const v1::NodeInfo& node);

  // Transactions begun so far (fewer than Put calls when calls overlapped).
  int64_t transactions() const;

 private:
  struct Pending {
    const v1::NodeInfo* node;
    std::optional<absl::StatusOr<std::string>> result;  // set by the writer of its batch
    bool done = false;                                  // guarded by mu_
  };

  void WriteBatch(const std::vector<Pending*>& batch);

  Store* const store_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending*> queue_;  // waiting for the next transaction
  bool writing_ = false;         // a caller is writing a batch
  int64_t transactions_ = 0;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_NODE_STORE_WRITER_H_
