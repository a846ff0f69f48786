"""The exceptions the SDK raises. Every message starts with what failed and
says why, in the words the CLI would print."""

from typing import Optional

import grpc


class RingmasterError(Exception):
    """Base of every SDK error. `code` is the gRPC status code of a failed
    call to the worker (None for local errors)."""

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None):
        super().__init__(message)
        self.code = code


class NotUnderWorkerError(RingmasterError):
    """The process was not started by a Ringmaster worker (no
    RINGMASTER_RANK_CONTEXT), or ringmaster.init() was not called."""


class RankContextError(RingmasterError):
    """The rank context file cannot be read or is not a rank context."""


class GenerationOverError(RingmasterError):
    """FAILED_PRECONDITION: this rank's generation is over (fenced) or the
    worker does not run it. Nothing was recorded; the rank must exit."""


class StoreTimeoutError(RingmasterError, TimeoutError):
    """A rendezvous key was not set in time (DEADLINE_EXCEEDED). The rank
    must exit: its generation fails rather than hangs."""


class CheckpointError(RingmasterError):
    """A checkpoint cannot be committed (a file missing, a bad path, the
    coordinator refused it) or resumed from (damaged)."""


def from_rpc(where: str, error: grpc.RpcError, default: type = RingmasterError) -> RingmasterError:
    """The SDK error for a failed call: `where` says what was asked;
    GenerationOverError for FAILED_PRECONDITION, `default` otherwise."""
    code = error.code()
    details = error.details() or code.name
    message = "%s: %s: %s" % (where, code.name.lower().replace("_", " "), details)
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return GenerationOverError(message, code)
    return default(message, code)
