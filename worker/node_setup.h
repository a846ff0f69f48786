#ifndef RINGMASTER_WORKER_NODE_SETUP_H_
#define RINGMASTER_WORKER_NODE_SETUP_H_

// What the worker does to its node before anything is wired (Worker::Start):
// the state directory's modes and lock, the memlock limit ranks inherit,
// what the node offers (NodeInfo), and the addresses in flags. Plain
// functions; no gRPC. Thread-compatible.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/node.pb.h"

namespace ringmaster::worker {

// Ranks of other accounts have no CAP_IPC_LOCK: what NCCL over RDMA pins is
// bounded by RLIMIT_MEMLOCK, which they inherit. Its soft limit goes up to
// the hard one (no privilege needed); a hard limit that is not unlimited is
// the runtime's (systemd LimitMEMLOCK=, docker --ulimit memlock=-1): warned.
void RaiseMemlockForRanks();

// Ranks of other accounts run the trainer: it and every directory above it
// must be open to them (an operator's install is; Bazel's runfiles under a
// 0700 /root are not). Logs a warning otherwise.
void WarnIfNotExecutableByOthers(const std::string& trainer);

// The state directory 0700, or 0711 when ranks run as other accounts: then
// everything in it but ranks/ (0711) and the socket is made the worker's
// alone (what an older worker left group- or world-readable included), and
// ranks reach only the socket and their own job's directory.
absl::Status RestrictStateDir(const std::string& state_dir, bool other_accounts);

// One worker per state directory: an flock on <state_dir>/worker.lock held
// for the life of the process (FAILED_PRECONDITION "another worker uses ...").
absl::Status LockStateDir(const std::string& state_dir);

std::string Hostname();
// This binary's path ("" if unknown).
std::string SelfExe();

// "host:port" / "[v6]:port" -> host, port. `port` is -1 when absent.
absl::Status SplitHostPort(const std::string& address, std::string* host, int* port);

// What the node offers: its GPUs, else `cpu_slots` (0: one per CPU), and
// its labels ("KEY=VALUE"; INVALID_ARGUMENT naming --label otherwise).
absl::StatusOr<v1::NodeInfo> DescribeNode(const std::string& hostname, const std::string& address, int cpu_slots,
                                          const std::vector<std::string>& labels);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_NODE_SETUP_H_
