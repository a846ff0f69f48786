"""Compiles .cu files with nvcc for sm_80 and sm_90 (+ compute_90 PTX).

Where CUDA is absent or forced off (RINGMASTER_CUDA=0, `--config=cpu`), the
macros below define nothing, and `if_cuda` picks its CPU-only branch, so the
rest of the build is CPU-only without further changes.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "CUDA_PATH")

# SASS for Ampere (A100) and Hopper (H100/H200), and PTX that newer GPUs JIT.
CUDA_GENCODE = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def if_cuda(if_true, if_false = []):
    """`if_true` when this build has CUDA, else `if_false`."""
    return if_true if CUDA_ENABLED else if_false

def cuda_library(name, srcs, hdrs = [], textual_hdrs = [], deps = [], nvcc_flags = [], visibility = None, **kwargs):
    """A cc_library of nvcc-compiled .cu files (nothing in a CPU-only build).

    Args:
      name: the cc_library's name.
      srcs: .cu files.
      hdrs: plain C++ headers that declare the launchers (the library's interface).
      textual_hdrs: .cuh files the .cu files include.
      deps: cc_library dependencies; the CUDA runtime is added.
      nvcc_flags: extra nvcc flags.
      visibility: of the cc_library.
      **kwargs: passed on to the cc_library (tags, testonly, ...).
    """
    if not CUDA_ENABLED:
        return
    objs = []
    for src in srcs:
        obj = "_cuda_objs/%s/%s.pic.o" % (name, src[:-len(".cu")])
        native.genrule(
            name = "%s_nvcc_%s" % (name, src.replace("/", "_").replace(".", "_")),
            srcs = [src] + hdrs + textual_hdrs,
            outs = [obj],
            # nvcc finds its own headers relative to the path it is started
            # by, so it runs from the toolkit, not through a symlink.
            cmd = " ".join([
                CUDA_PATH + "/bin/nvcc",
                "-c -O3 -std=c++17 -lineinfo --expt-relaxed-constexpr",
                "-Xcompiler=-fPIC,-Wall",
                "-I. -I$(GENDIR)",
            ] + CUDA_GENCODE + nvcc_flags + ["-o $@ $(location %s)" % src]),
            message = "nvcc " + src,
        )
        objs.append(obj)
    # Every object must carry SASS for sm_80 and sm_90 and compute_90 PTX.
    native.sh_test(
        name = name + "_fatbin_test",
        srcs = ["//third_party:fatbin_test.sh"],
        args = ["$(location //third_party:fatbin_archs.py)"] + ["$(location %s)" % o for o in objs],
        data = objs + ["//third_party:fatbin_archs.py"],
        size = "small",
    )
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        textual_hdrs = textual_hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        visibility = visibility,
        **kwargs
    )

def cuda_cc_library(name, **kwargs):
    """A host-compiled cc_library that uses CUDA APIs (nothing in a CPU-only build)."""
    if CUDA_ENABLED:
        native.cc_library(name = name, **kwargs)

def cuda_cc_test(name, tags = [], **kwargs):
    """A GPU test: tagged `gpu`; it must skip with a clear message when no device is present."""
    if CUDA_ENABLED:
        native.cc_test(name = name, tags = tags + ["gpu"], **kwargs)

def cuda_cc_binary(name, **kwargs):
    if CUDA_ENABLED:
        native.cc_binary(name = name, **kwargs)
