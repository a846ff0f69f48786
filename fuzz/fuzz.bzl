"""fuzz_test: a libFuzzer target run by the test suite under ASan and UBSan.

The target's LLVMFuzzerTestOneInput is linked (with the host compiler, gcc)
with fuzz/replay_main.cc, the driver that replays the checked-in corpus
(fuzz/corpus/<name>/) and then runs a bounded number of deterministic
mutations. The binary and everything it depends on (our libraries, the
generated protobuf code) is built in a configuration with
-fsanitize=address,undefined, through a transition on this rule only: the
rest of the build is unchanged. scripts/fuzz.sh builds the same sources with
clang -fsanitize=fuzzer,address for long runs with coverage feedback.
"""

_SANITIZE = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=undefined",
    "-fno-omit-frame-pointer",
]

def _sanitize_transition_impl(settings, attr):
    return {
        "//command_line_option:copt": settings["//command_line_option:copt"] + _SANITIZE,
        "//command_line_option:linkopt": settings["//command_line_option:linkopt"] + ["-fsanitize=address,undefined"],
    }

_sanitize_transition = transition(
    implementation = _sanitize_transition_impl,
    inputs = ["//command_line_option:copt", "//command_line_option:linkopt"],
    outputs = ["//command_line_option:copt", "//command_line_option:linkopt"],
)

def _sanitized_test_impl(ctx):
    binary = ctx.attr.binary[0]
    binary_file = binary[DefaultInfo].files_to_run.executable
    out = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.symlink(output = out, target_file = binary_file, is_executable = True)
    runfiles = ctx.runfiles(files = ctx.files.data).merge(binary[DefaultInfo].default_runfiles)
    return [
        DefaultInfo(executable = out, runfiles = runfiles),
        testing.TestEnvironment({
            # Leaks are reported at exit; UBSan findings abort with a stack.
            "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1:strict_string_checks=1",
            "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
        }),
    ]

_sanitized_test = rule(
    implementation = _sanitized_test_impl,
    test = True,
    attrs = {
        "binary": attr.label(cfg = _sanitize_transition, executable = True, mandatory = True),
        "data": attr.label_list(allow_files = True),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)

def fuzz_test(name, srcs, deps = [], runs = 2000, max_seconds = 20, size = "medium", tags = []):
    """A fuzz target `name` (srcs define LLVMFuzzerTestOneInput) and its test.

    Creates :<name>_lib (the target without a main, what scripts/fuzz.sh
    builds with clang), :<name>_replay (the replay driver, unsanitized: to
    reproduce a crash file by hand) and the test :<name>_test, which runs the
    sanitized driver on fuzz/corpus/<name>/ for `runs` mutations (stopping
    early after `max_seconds` of mutations: inflated inputs cost up to a
    second each under ASan, and the suite runs twice in CI; long runs are
    scripts/fuzz.sh's), after replaying once, without
    mutating them, the inputs of fuzz/corpus/<name>.oversized/ (requests
    inflated to megabytes: each costs up to a second under ASan).
    """
    native.cc_library(
        name = name + "_lib",
        testonly = True,
        srcs = srcs,
        deps = deps + [":fuzz_check"],
        alwayslink = True,
    )
    native.cc_binary(
        name = name + "_replay",
        testonly = True,
        srcs = ["replay_main.cc"],
        deps = [":" + name + "_lib"],
    )
    corpus = native.glob(["corpus/%s/*" % name])
    oversized = native.glob(["corpus/%s.oversized/*" % name])
    _sanitized_test(
        name = name + "_test",
        binary = ":" + name + "_replay",
        data = corpus + oversized,
        size = size,
        tags = tags,
        args = [
            "--runs=%d" % runs,
            "--max_seconds=%d" % max_seconds,
        ] + (["--replay_only=fuzz/corpus/%s.oversized" % name] if oversized else []) + [
            "fuzz/corpus/" + name,
        ],
    )
