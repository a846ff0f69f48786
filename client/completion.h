#ifndef RINGMASTER_CLIENT_COMPLETION_H_
#define RINGMASTER_CLIENT_COMPLETION_H_

// `ringmaster completion bash|zsh`: a shell completion script generated from
// the commands and flags of the CLI11 app that main.cc builds, so that it
// always matches the binary that printed it. It completes command names,
// flags (the command's and its parents', which CLI11 accepts after the
// command), the values of flags that have a fixed set of them or name a file,
// and file arguments. The zsh script runs the bash one through zsh's
// bashcompinit. Pure; thread-compatible.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "client/cli.h"

namespace ringmaster::client {

// What values complete to, by flag ("--output", "-o") or positional name
// ("shell"); any other value completes to nothing.
struct CompletionOptions {
  std::map<std::string, std::vector<std::string>> words;  // one of these words
  std::set<std::string> files;                            // a file name
};

// The script for bash: functions _ringmaster (reading COMP_WORDS and
// COMP_CWORD, filling COMPREPLY) and its helpers, then
// `complete -F _ringmaster ringmaster`.
std::string BashCompletionScript(const CLI::App& app, const CompletionOptions& options);

// The script for zsh: `#compdef ringmaster`, bashcompinit, the bash script's
// functions (the completer named _ringmaster_bash, since zsh autoloads the
// file as _ringmaster when it is on $fpath).
std::string ZshCompletionScript(const CLI::App& app, const CompletionOptions& options);

// Prints the script for `shell` ("bash" or "zsh", checked by the caller;
// anything else: kExitUsage with a one-line error).
int RunCompletion(const CLI::App& app, const std::string& shell, const CompletionOptions& options, Console& console);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_COMPLETION_H_
