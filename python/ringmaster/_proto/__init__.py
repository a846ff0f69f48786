"""Protobuf and gRPC modules generated from proto/ by //python:sdk_tree.

Private: the SDK's public API takes and returns plain Python values. The
generated files import each other as ``ringmaster._proto.x_pb2`` (the build
rewrites protoc's ``from proto import x_pb2``), so a program's own ``proto``
package, if it has one, is never shadowed.
"""
