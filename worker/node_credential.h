#ifndef RINGMASTER_WORKER_NODE_CREDENTIAL_H_
#define RINGMASTER_WORKER_NODE_CREDENTIAL_H_

// NodeCredential: the node's credential, which the coordinator issues at the
// node's first registration (RegisterNodeResponse.credential) and which says
// which node the worker's calls come from. The worker's coordinator channel
// (CoordinatorChannel) sends it with every call in the
// "x-ringmaster-node-credential" header: the session's, the exit reports, the
// log pusher's and the trainers' rendezvous and checkpoint calls the agent
// socket forwards. Kept in <state-dir>/node-credential (mode 0600, in the
// worker's 0700 state directory, replaced atomically), so that a restarted
// worker presents it when it registers again; without it, the coordinator
// refuses to let anyone register the node again. Never logged.
//
// Thread-safe.

#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "common/grpc_security.h"

namespace ringmaster::worker {

class NodeCredential {
 public:
  // `path` empty: kept in memory only (tests).
  explicit NodeCredential(std::string path = "");

  // Reads the kept credential, if any (none: OK, empty). PERMISSION_DENIED
  // when the file is readable by group or others; INVALID_ARGUMENT when it
  // is not 64 hex digits.
  absl::Status Load();
  // Replaces the credential and writes it (0600, atomically) before it is
  // used. The file error, if any, is returned; the credential is used anyway.
  absl::Status Set(const std::string& credential);
  std::string Get() const;
  // The header to send ({} while there is none): a HeaderSource.
  Headers CallHeaders() const;

 private:
  const std::string path_;
  mutable std::mutex mu_;
  std::string credential_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_NODE_CREDENTIAL_H_
