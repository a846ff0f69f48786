"""Tests of CUDA kernel source run on the host by the host_cuda harness.

They need the CUDA toolkit's headers (dim3 and float4, __half and
__nv_bfloat16 with the device's rounding) and no GPU: they build and run on
any machine whose build has CUDA (`bazel test //...`), untagged. Where the
build has no CUDA (no toolkit, or `--config=cpu`), these macros define
nothing, as third_party/cuda.bzl's do: the real conversions cannot be built
there, and a stand-in would test the stand-in, so the tests neither build
nor count as passed in a CPU-only run.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED")

def host_cuda_test(name, deps = [], copts = [], **kwargs):
    """A cc_test of kernel source run on the host (nothing in a CPU-only build).

    Args:
      name: the test's name.
      deps: its dependencies; the harness is added.
      copts: compile options; -Wno-unknown-pragmas (kernels' #pragma unroll) is added.
      **kwargs: passed on to the cc_test (srcs, size, ...).
    """
    if CUDA_ENABLED:
        native.cc_test(
            name = name,
            deps = deps + ["//engine/kernels/testing:host_cuda"],
            copts = copts + ["-Wno-unknown-pragmas"],
            **kwargs
        )
