#include "worker/run_as.h"

#include <grp.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringmaster::worker {
namespace {

// One password-database entry, copied out of getpw*_r's buffer.
struct PasswdEntry {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
};

std::optional<PasswdEntry> FromPasswd(const passwd* pw) {
  if (pw == nullptr) return std::nullopt;
  return PasswdEntry{pw->pw_name, pw->pw_uid, pw->pw_gid, pw->pw_dir ? pw->pw_dir : ""};
}

std::optional<PasswdEntry> PasswdByName(const std::string& name) {
  std::vector<char> buffer(16384);
  passwd pw;
  passwd* found = nullptr;
  if (getpwnam_r(name.c_str(), &pw, buffer.data(), buffer.size(), &found) != 0) return std::nullopt;
  return FromPasswd(found);
}

std::optional<PasswdEntry> PasswdByUid(uid_t uid) {
  std::vector<char> buffer(16384);
  passwd pw;
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buffer.data(), buffer.size(), &found) != 0) return std::nullopt;
  return FromPasswd(found);
}

// The account's own groups (as initgroups would set them), its primary one
// included.
std::vector<gid_t> GroupsOf(const std::string& name, gid_t gid) {
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  while (getgrouplist(name.c_str(), gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<size_t>(count));
  }
  groups.resize(static_cast<size_t>(count));
  return groups;
}

RunAccount FromEntry(const PasswdEntry& entry) {
  RunAccount account;
  account.name = entry.name;
  account.uid = entry.uid;
  account.gid = entry.gid;
  account.home = entry.home;
  account.groups = GroupsOf(entry.name, entry.gid);
  return account;
}

absl::Status NotWorkersOwn(const RunAccount& account, const std::string& what) {
  if (account.uid == geteuid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", account.name, " is the worker's own account: its ranks would keep the worker's privileges "
        "(--run-as self says so explicitly)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadMapFile(const std::string& file) {
  struct stat st;
  if (stat(file.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("--run-as-map ", file, ": ", std::strerror(errno)));
  }
  // Whoever can write the map chooses which account a user's jobs run as.
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || (st.st_uid != 0 && st.st_uid != geteuid())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--run-as-map ", file, ": must be owned by root or the worker and not writable by group or others (chmod "
        "644)"));
  }
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return absl::FailedPreconditionError(absl::StrCat("cannot read --run-as-map ", file));
  return text.str();
}

}  // namespace

absl::StatusOr<RunAccount> LookupAccount(const std::string& spec, const std::string& what) {
  RunAccount account;
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  uint32_t uid = 0, gid = 0;
  if (parts.size() == 2) {
    if (!absl::SimpleAtoi(parts[0], &uid) || !absl::SimpleAtoi(parts[1], &gid)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": \"", spec, "\" is not UID:GID"));
    }
    account.uid = uid;
    account.gid = gid;
    account.name = spec;
    if (std::optional<PasswdEntry> entry = PasswdByUid(uid)) {
      account.name = entry->name;
      account.home = entry->home;
    }
  } else if (parts.size() == 1 && !spec.empty() && absl::SimpleAtoi(spec, &uid)) {
    std::optional<PasswdEntry> entry = PasswdByUid(uid);
    if (!entry.has_value()) {
      return absl::NotFoundError(
          absl::StrCat(what, ": uid ", uid, " has no entry in the password database; give UID:GID"));
    }
    account = FromEntry(*entry);
  } else if (parts.size() == 1 && !spec.empty()) {
    std::optional<PasswdEntry> entry = PasswdByName(spec);
    if (!entry.has_value()) return absl::NotFoundError(absl::StrCat(what, ": no account \"", spec, "\" on this node"));
    account = FromEntry(*entry);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(what, ": \"", spec, "\" is not an account (NAME, UID or UID:GID)"));
  }
  if (account.uid == 0 || account.gid == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", account.name, " is root (uid ", account.uid, ", gid ", account.gid,
                     "); ranks run as an unprivileged account"));
  }
  for (gid_t g : account.groups) {
    if (g == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", account.name, " is a member of group 0 (root); ranks run unprivileged"));
    }
  }
  return account;
}

RunAccount WorkerAccount() {
  RunAccount account;
  account.uid = geteuid();
  account.gid = getegid();
  account.name = absl::StrCat(account.uid, ":", account.gid);
  if (std::optional<PasswdEntry> entry = PasswdByUid(account.uid)) {
    account.name = entry->name;
    account.home = entry->home;
  }
  account.is_worker = true;
  return account;
}

absl::StatusOr<std::map<std::string, std::string>> ParseAccountMap(const std::string& text, const std::string& file) {
  std::map<std::string, std::string> map;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ":", number, ": expected \"user account\", got \"", absl::StripAsciiWhitespace(line), "\""));
    }
    if (!map.emplace(std::string(fields[0]), std::string(fields[1])).second) {
      return absl::InvalidArgumentError(absl::StrCat(file, ":", number, ": user ", fields[0], " is mapped twice"));
    }
  }
  return map;
}

RunAsPolicy RunAsPolicy::Self() {
  RunAsPolicy policy;
  policy.mode_ = Mode::kSelf;
  policy.account_ = WorkerAccount();
  return policy;
}

absl::StatusOr<RunAsPolicy> RunAsPolicy::Account(const std::string& spec) {
  absl::StatusOr<RunAccount> account = LookupAccount(spec, "--run-as");
  if (!account.ok()) return account.status();
  if (absl::Status s = NotWorkersOwn(*account, "--run-as"); !s.ok()) return s;
  RunAsPolicy policy;
  policy.mode_ = Mode::kAccount;
  policy.account_ = *std::move(account);
  return policy;
}

absl::StatusOr<RunAsPolicy> RunAsPolicy::Owner(const std::map<std::string, std::string>& map,
                                               const std::string& file) {
  RunAsPolicy policy;
  policy.mode_ = Mode::kOwner;
  policy.map_file_ = file;
  for (const auto& [user, spec] : map) {
    const std::string what = absl::StrCat("--run-as-map ", file, ": user ", user);
    absl::StatusOr<RunAccount> account = LookupAccount(spec, what);
    if (!account.ok()) return account.status();
    if (absl::Status s = NotWorkersOwn(*account, what); !s.ok()) return s;
    policy.owners_[user] = *std::move(account);
  }
  return policy;
}

absl::StatusOr<RunAccount> RunAsPolicy::AccountFor(const std::string& owner) const {
  if (mode_ != Mode::kOwner) return account_;
  if (owner.empty()) {
    return absl::PermissionDeniedError(
        "the job has no owner (the coordinator does not authenticate users), and this node runs each job as its "
        "owner's account (ringmaster-worker --run-as owner)");
  }
  auto it = owners_.find(owner);
  if (it == owners_.end()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "user ", owner, " has no account on this node (not in ", map_file_,
        "); ask the operator to map it (ringmaster-worker --run-as-map)"));
  }
  return it->second;
}

std::string RunAsPolicy::Describe() const {
  switch (mode_) {
    case Mode::kSelf:
      return absl::StrCat("the worker's own account (", account_.name, ")");
    case Mode::kAccount:
      return absl::StrCat(account_.name, " (uid ", account_.uid, ", gid ", account_.gid, ")");
    case Mode::kOwner:
      return absl::StrCat("each job's owner's account (", owners_.size(), " user(s) in ", map_file_, ")");
  }
  return "";
}

absl::StatusOr<RunAsPolicy> ResolveRunAs(const std::string& run_as, const std::string& map_file, uid_t worker_euid,
                                         bool local_mode) {
  if (run_as == "owner") {
    if (map_file.empty()) {
      return absl::InvalidArgumentError("--run-as owner needs --run-as-map FILE (\"user account\" per line)");
    }
    absl::StatusOr<std::string> text = ReadMapFile(map_file);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::map<std::string, std::string>> map = ParseAccountMap(*text, map_file);
    if (!map.ok()) return map.status();
    return RunAsPolicy::Owner(*map, map_file);
  }
  if (!map_file.empty()) return absl::InvalidArgumentError("--run-as-map is used only with --run-as owner");
  if (run_as == "self") return RunAsPolicy::Self();
  if (!run_as.empty()) return RunAsPolicy::Account(run_as);
  if (local_mode) return RunAsPolicy::Self();
  // In a cluster the worker holds a key and the join token, which ranks of
  // its own account could read: never the default, whoever the worker is.
  return absl::InvalidArgumentError(absl::StrCat(
      "--run-as: the worker ", worker_euid == 0 ? "runs as root and " : "",
      "serves a cluster (TLS): say which account ranks run as (--run-as ACCOUNT, or --run-as owner with "
      "--run-as-map FILE), or --run-as self to run them as the worker's own account, which can read its key and "
      "join token"));
}

ScopedFsIdentity::ScopedFsIdentity(const RunAccount& account) {
  if (account.is_worker) return;
  old_gid_ = static_cast<gid_t>(setfsgid(account.gid));
  old_uid_ = static_cast<uid_t>(setfsuid(account.uid));
  switched_ = true;
  // setfsuid/setfsgid report failure only by not changing anything.
  const gid_t now_gid = static_cast<gid_t>(setfsgid(static_cast<gid_t>(-1)));
  const uid_t now_uid = static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1)));
  if (now_uid != account.uid || now_gid != account.gid) {
    status_ = absl::FailedPreconditionError(absl::StrCat(
        "cannot act as ", account.name, " (setfsuid/setfsgid): the worker needs CAP_SETUID and CAP_SETGID "
        "(run it as root, or see docs for its capabilities)"));
  }
}

ScopedFsIdentity::~ScopedFsIdentity() {
  if (!switched_) return;
  setfsuid(old_uid_);
  setfsgid(old_gid_);
}

}  // namespace ringmaster::worker
