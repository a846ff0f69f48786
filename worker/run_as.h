#ifndef RINGMASTER_WORKER_RUN_AS_H_
#define RINGMASTER_WORKER_RUN_AS_H_

// Which Unix account a job's ranks run as (the worker's --run-as), so that
// ranks never run with the worker's privileges:
//   self     the worker's own account: nothing is switched. Local mode (one
//            person's machine, `ringmaster local up`); in cluster mode only
//            when said, since the ranks can then read the worker's key and
//            join token (a single-user allocation whose user owns them).
//   ACCOUNT  every rank runs as this account: a name from the password
//            database, a uid in it, or UID:GID (no entry needed).
//   owner    each job's ranks run as its owner's account (Job.owner, the
//            user the coordinator authenticated), mapped by a file of
//            "user account" lines (--run-as-map), as Slurm runs a job as its
//            submitter: dataset permissions then mean what they say. A job
//            whose owner is not in the map (or that has none) is refused.
// Unset, the worker picks (ResolveRunAs): self in local mode (no TLS, a
// loopback coordinator); in cluster mode a refusal to start, naming the flag,
// whether the worker is root or not (ranks of the worker's own account could
// read its key and join token: --run-as self must be said).
//
// An account is never root (uid or gid 0) nor the worker's own (when the
// worker is not root): the ranks would keep the worker's privileges. Its
// supplementary groups are its own (initgroups), never the worker's.
//
// ScopedFsIdentity switches the calling thread's filesystem uid and gid
// (setfsuid/setfsgid: per thread) to an account's for its lifetime, so that
// what the worker creates in an account's directory is the account's and is
// checked with the account's permissions, not root's.
//
// Thread-safe after construction (RunAsPolicy is immutable).

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::worker {

struct RunAccount {
  std::string name;  // "uid:gid" when the password database has no entry
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (its own; may be empty)
  std::string home;           // "" when unknown
  bool is_worker = false;     // the worker's own account: nothing to switch
};

// NAME, UID or UID:GID -> the account. NOT_FOUND for an unknown name or a
// uid without an entry (give UID:GID); INVALID_ARGUMENT for root (uid or gid
// 0) or a malformed value. `what` names the flag or file line in messages.
absl::StatusOr<RunAccount> LookupAccount(const std::string& spec, const std::string& what);

// The worker's own account (uid/gid of this process, its name and home when
// the password database has them; no supplementary group list: nothing is
// switched).
RunAccount WorkerAccount();

// "user account" lines; '#' starts a comment. INVALID_ARGUMENT naming
// `file`:line for a malformed or repeated user.
absl::StatusOr<std::map<std::string, std::string>> ParseAccountMap(const std::string& text, const std::string& file);

class RunAsPolicy {
 public:
  enum class Mode { kSelf, kAccount, kOwner };

  static RunAsPolicy Self();
  // `account` must not be the worker's own (INVALID_ARGUMENT).
  static absl::StatusOr<RunAsPolicy> Account(const std::string& spec);
  // Every account of the map is looked up now: a missing one fails here.
  static absl::StatusOr<RunAsPolicy> Owner(const std::map<std::string, std::string>& map, const std::string& file);

  Mode mode() const { return mode_; }
  // False for kSelf: ranks run as the worker.
  bool drops_privileges() const { return mode_ != Mode::kSelf; }
  // The account the ranks of a job owned by `owner` run as.
  // PERMISSION_DENIED naming the owner (kOwner: not in the map, or none).
  absl::StatusOr<RunAccount> AccountFor(const std::string& owner) const;
  // For the worker's startup line: "the worker's own account (root)",
  // "nobody (uid 65534)", "each job's owner's account (2 users in FILE)".
  std::string Describe() const;

 private:
  Mode mode_ = Mode::kSelf;
  RunAccount account_;                        // kSelf, kAccount
  std::map<std::string, RunAccount> owners_;  // kOwner
  std::string map_file_;
};

// --run-as (empty: unset) and --run-as-map, with what the worker knows of
// itself: its effective uid and whether it is in local mode (no TLS, a
// loopback coordinator). INVALID_ARGUMENT naming the flag: --run-as-map
// without --run-as owner (or the reverse), cluster mode with no --run-as
// (root or not), an account that is root or the worker's own.
absl::StatusOr<RunAsPolicy> ResolveRunAs(const std::string& run_as, const std::string& map_file, uid_t worker_euid,
                                         bool local_mode);

// Switches this thread's filesystem uid/gid to `account`'s (nothing for the
// worker's own account) and back on destruction. ok() is false when the
// switch did not take (no CAP_SETUID/CAP_SETGID): status() says so
// (FAILED_PRECONDITION: the node, not the job, is at fault).
class ScopedFsIdentity {
 public:
  explicit ScopedFsIdentity(const RunAccount& account);
  ~ScopedFsIdentity();
  ScopedFsIdentity(const ScopedFsIdentity&) = delete;
  ScopedFsIdentity& operator=(const ScopedFsIdentity&) = delete;

  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }

 private:
  bool switched_ = false;
  uid_t old_uid_ = 0;
  gid_t old_gid_ = 0;
  absl::Status status_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_RUN_AS_H_
