"""Compiles .proto files with the system's protoc and grpc_cpp_plugin."""

def ringmaster_proto_library(name, srcs, deps = [], grpc = True, visibility = None):
    """A cc_library holding the C++ messages (and gRPC stubs) of `srcs`.

    Args:
      name: the cc_library's name.
      srcs: .proto files in this package; they import each other as "proto/x.proto".
      deps: other ringmaster_proto_library targets whose protos these import.
      grpc: also generate the gRPC service stubs (.grpc.pb.h/.cc).
      visibility: of the cc_library.
    """
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    dep_protos = [d + "_protos" for d in deps]
    native.filegroup(name = name + "_protos", srcs = srcs + dep_protos, visibility = visibility)
    grpc_flags = "--grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin)" if grpc else ""
    native.genrule(
        name = name + "_gen",
        srcs = srcs + dep_protos,
        outs = outs,
        cmd = ("protoc -I. -I/usr/include --cpp_out=$(GENDIR) %s " % grpc_flags) +
              " ".join(["$(location %s)" % s for s in srcs]),
        message = "protoc " + " ".join(srcs),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["@system//:protobuf"] + (["@system//:grpcpp"] if grpc else []),
        visibility = visibility,
    )
