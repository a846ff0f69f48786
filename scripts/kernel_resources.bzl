"""kernel_resources_test: scripts/kernel_resources.py --check over a package's CUDA kernels.

Call it last in the package's BUILD file: it hands the tool the nvcc command of every
cuda_library declared above it (read back with native.existing_rules()), so that the tool
compiles each .cu exactly as the build does. In a build without CUDA the test prints
"SKIP: why".
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "CUDA_PATH", "CUDA_REASON")

def _quoted(arg):
    """One test argument, whole through Bazel's shell tokenization and make-variable expansion."""
    if "'" in arg:
        fail("kernel_resources_test: cannot pass an argument with a single quote: " + arg)
    return "'" + arg.replace("$", "$$") + "'"

def _build_commands():
    """[(source file, nvcc command)] of the package's cuda_library genrules so far."""
    commands = []
    for rule in native.existing_rules().values():
        cmd = rule.get("cmd", "")
        if rule["kind"] != "genrule" or "/bin/nvcc" not in cmd:
            continue
        for src in rule.get("srcs", []):
            name = src.split(":")[-1]
            if name.endswith(".cu"):
                commands.append((name, cmd))
    return sorted(commands)

def kernel_resources_test(name, notes, srcs, data = [], **kwargs):
    """An sh_test that fails on spills, kernels without __launch_bounds__, shared memory past
    48 KB without an opt-in, or a stale table in `notes`.

    Args:
      name: the test.
      notes: label of the Markdown file with the table (bench/GPU_NOTES.md).
      srcs: the test's shell wrapper, which runs scripts/kernel_resources.py.
      data: the kernel sources (.cu, .cuh, .h) and the tool.
      **kwargs: passed on to the sh_test (size, tags, ...).
    """
    if CUDA_ENABLED:
        args = ["--cuda-path=" + CUDA_PATH] + [
            _quoted("--build-command=%s=%s" % (src, cmd))
            for src, cmd in _build_commands()
        ]
    else:
        args = [_quoted("--skip=" + CUDA_REASON)]
    native.sh_test(
        name = name,
        srcs = srcs,
        args = args,
        data = data + [notes],
        **kwargs
    )
