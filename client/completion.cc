#include "client/completion.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace ringmaster::client {
namespace {

// The word lists stand unquoted in `case` patterns and double-quoted
// strings: names of our own flags and commands, which need no quoting.
constexpr char kFiles[] = "<files>";  // a value that completes to file names

// One command: its path from the root ("" or "nodes drain") and what follows
// it on the command line.
struct Command {
  std::string path;
  std::vector<std::string> subcommands;
  std::vector<std::string> flags;   // its own and its parents': "-o", "--output"
  std::vector<std::string> valued;  // the flags that take a value
  std::string positional;           // what its arguments complete to: words, kFiles or ""
};

bool Hidden(const CLI::Option* option) { return option->get_group().empty(); }

void AddOnce(std::vector<std::string>* words, const std::string& word) {
  if (std::find(words->begin(), words->end(), word) == words->end()) words->push_back(word);
}

std::string Completes(const std::string& name, const CompletionOptions& options) {
  if (options.files.count(name) > 0) return kFiles;
  auto it = options.words.find(name);
  return it == options.words.end() ? "" : absl::StrJoin(it->second, " ");
}

// Walks `app` and its subcommands depth first; `inherited` holds the
// parents' flags.
void Collect(const CLI::App& app, const std::string& path, const CompletionOptions& options, Command inherited,
             std::vector<Command>* commands) {
  Command command = std::move(inherited);
  command.path = path;
  command.subcommands.clear();
  command.positional.clear();
  for (const CLI::Option* option : app.get_options()) {
    if (Hidden(option)) continue;
    if (!option->nonpositional()) {
      if (command.positional.empty()) command.positional = Completes(option->get_name(true), options);
      continue;
    }
    std::vector<std::string> names;
    for (const std::string& s : option->get_snames()) names.push_back("-" + s);
    for (const std::string& l : option->get_lnames()) names.push_back("--" + l);
    for (const std::string& name : names) {
      AddOnce(&command.flags, name);
      if (option->get_expected_max() > 0) AddOnce(&command.valued, name);  // flags expect 0 values
    }
  }
  const std::vector<const CLI::App*> subcommands = app.get_subcommands([](const CLI::App*) { return true; });
  for (const CLI::App* sub : subcommands) command.subcommands.push_back(sub->get_name());
  commands->push_back(command);
  for (const CLI::App* sub : subcommands) {
    Collect(*sub, path.empty() ? sub->get_name() : absl::StrCat(path, " ", sub->get_name()), options, command,
            commands);
  }
}

// What follows a command, by command path: _ringmaster_command.
std::string CommandFunction(const std::vector<Command>& commands) {
  std::string out =
      "# _ringmaster_command PATH: sets subs (the commands after PATH), flags, valued (the flags that\n"
      "# take a value) and positional (what an argument completes to: words, <files> or nothing) for\n"
      "# the command PATH (\"\" or \"nodes drain\").\n"
      "_ringmaster_command() {\n"
      "  case \"$1\" in\n";
  for (const Command& c : commands) {
    absl::StrAppend(&out, "    \"", c.path, "\")\n",                             //
                    "      subs=\"", absl::StrJoin(c.subcommands, " "), "\"\n",  //
                    "      flags=\"", absl::StrJoin(c.flags, " "), "\"\n",       //
                    "      valued=\"", absl::StrJoin(c.valued, " "), "\"\n",     //
                    "      positional=\"", c.positional, "\"\n",                 //
                    "      ;;\n");
  }
  absl::StrAppend(&out,
                  "    *) subs=\"\" flags=\"\" valued=\"\" positional=\"\" ;;\n"
                  "  esac\n"
                  "}\n");
  return out;
}

// What flags' values complete to: _ringmaster_values.
std::string ValuesFunction(const CompletionOptions& options) {
  std::string out =
      "# _ringmaster_values FLAG: sets values to what FLAG's value completes to.\n"
      "_ringmaster_values() {\n"
      "  case \"$1\" in\n";
  for (const auto& [flag, words] : options.words) {
    if (!absl::StartsWith(flag, "-")) continue;  // a positional's
    absl::StrAppend(&out, "    ", flag, ") values=\"", absl::StrJoin(words, " "), "\" ;;\n");
  }
  std::vector<std::string> file_flags;
  for (const std::string& flag : options.files) {
    if (absl::StartsWith(flag, "-")) file_flags.push_back(flag);
  }
  if (!file_flags.empty()) {
    absl::StrAppend(&out, "    ", absl::StrJoin(file_flags, "|"), ") values=\"", kFiles, "\" ;;\n");
  }
  absl::StrAppend(&out,
                  "    *) values=\"\" ;;\n"
                  "  esac\n"
                  "}\n");
  return out;
}

// The completer (named COMPLETER here) and its helper: the same for every
// app. It walks the words before the cursor to find the command, skipping
// flags' values, then completes the word under the cursor.
// "<files>" is kFiles.
constexpr char kCompleter[] = R"sh(# _ringmaster_reply WORDS CUR: COMPREPLY = the WORDS (or files) that start with CUR.
_ringmaster_reply() {
  if [[ "$1" == "<files>" ]]; then
    local IFS=$'\n'
    COMPREPLY=($(compgen -f -- "$2"))
    compopt -o filenames 2>/dev/null  # bash 4+, in a completion
  else
    COMPREPLY=($(compgen -W "$1" -- "$2"))
  fi
  return 0
}

# Reads COMP_WORDS and COMP_CWORD; fills COMPREPLY.
COMPLETER() {
  [[ -n "${ZSH_VERSION-}" ]] && setopt localoptions ksharrays  # arrays from 0, as in bash
  local cur="${COMP_WORDS[COMP_CWORD]}" path="" pending="" word subs flags valued positional values i
  COMPREPLY=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${COMP_WORDS[i]}"
    if [[ -n "$pending" ]]; then
      pending=""  # the value of the flag before
      continue
    fi
    _ringmaster_command "$path"
    if [[ " $valued " == *" $word "* ]]; then
      pending="$word"
    elif [[ " $subs " == *" $word "* ]]; then
      path="${path:+$path }$word"
    fi
  done
  _ringmaster_command "$path"
  if [[ -n "$pending" ]]; then
    _ringmaster_values "$pending"
    _ringmaster_reply "$values" "$cur"
  elif [[ "$cur" == -* ]]; then
    _ringmaster_reply "$flags" "$cur"
  elif [[ -n "$subs" ]]; then
    _ringmaster_reply "$subs" "$cur"
  else
    _ringmaster_reply "$positional" "$cur"
  fi
}
)sh";

// The completion functions; the completer is named `completer`.
std::string Functions(const CLI::App& app, const CompletionOptions& options, const std::string& completer) {
  std::vector<Command> commands;
  Collect(app, "", options, Command(), &commands);
  return absl::StrCat(CommandFunction(commands), "\n", ValuesFunction(options), "\n",
                      absl::StrReplaceAll(kCompleter, {{"COMPLETER", completer}}));
}

}  // namespace

std::string BashCompletionScript(const CLI::App& app, const CompletionOptions& options) {
  return absl::StrCat(
      "# bash completion for ringmaster, generated by `ringmaster completion bash`.\n"
      "# This shell: source <(ringmaster completion bash)\n"
      "# Every shell: ringmaster completion bash > ~/.local/share/bash-completion/completions/ringmaster\n"
      "\n",
      Functions(app, options, "_ringmaster"),
      "\n"
      "complete -F _ringmaster ringmaster\n");
}

std::string ZshCompletionScript(const CLI::App& app, const CompletionOptions& options) {
  return absl::StrCat(
      "#compdef ringmaster\n"
      "# zsh completion for ringmaster, generated by `ringmaster completion zsh`: the bash completion,\n"
      "# through zsh's bashcompinit.\n"
      "# This shell: source <(ringmaster completion zsh)\n"
      "# Every shell: ringmaster completion zsh > \"${fpath[1]}/_ringmaster\" (then start a new shell)\n"
      "\n"
      "(( ${+functions[compdef]} )) || { autoload -U +X compinit && compinit; }\n"
      "(( ${+functions[complete]} )) || { autoload -U +X bashcompinit && bashcompinit; }\n"
      "\n",
      Functions(app, options, "_ringmaster_bash"),
      "\n"
      "complete -F _ringmaster_bash ringmaster\n"
      "# Autoloaded from $fpath as _ringmaster, this file runs at the first completion: complete it too.\n"
      "[[ \"${funcstack[1]-}\" == _ringmaster ]] && _bash_complete -F _ringmaster_bash\n"
      "return 0\n");
}

int RunCompletion(const CLI::App& app, const std::string& shell, const CompletionOptions& options, Console& console) {
  if (shell == "bash") {
    console.out << BashCompletionScript(app, options);
  } else if (shell == "zsh") {
    console.out << ZshCompletionScript(app, options);
  } else {
    console.err << "ringmaster: completion: unknown shell \"" << shell << "\" (expected bash or zsh)\n";
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace ringmaster::client
