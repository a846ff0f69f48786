"""PyTorch glue: a torch.distributed.Store over the coordinator's rendezvous
key-value service, and a should_checkpoint_and_exit() the ranks agree on.

    import torch.distributed as dist
    import ringmaster.torch
    ctx = ringmaster.init()
    dist.init_process_group("gloo", store=ringmaster.torch.store(),
                            rank=ctx.rank, world_size=ctx.world_size)

No MASTER_ADDR is needed: the keys Gloo exchanges, and NCCL's unique id,
travel through the worker to the coordinator, in a key space of this job
generation only. A rank of a generation that is over is refused
(GenerationOverError, FAILED_PRECONDITION) and must exit.

Imports torch; `import ringmaster` alone does not."""

import datetime
import random
import time
from typing import Callable, List, Optional, TypeVar

import grpc
import torch
import torch.distributed as dist

import ringmaster
from ringmaster._proto import rendezvous_service_pb2 as rdv
from ringmaster._proto import rendezvous_service_pb2_grpc as rdv_grpc
from ringmaster.agent import RANK_SECRET_HEADER, RPC_TIMEOUT_SECONDS, open_channel
from ringmaster.context import RankContext
from ringmaster.errors import RingmasterError, StoreTimeoutError, from_rpc

T = TypeVar("T")

# Added to a blocking call's timeout for its gRPC deadline, so that the
# service's own DEADLINE_EXCEEDED (which names the missing keys) comes first.
_DEADLINE_SLACK = 2.0
# A coordinator at one of its limits answers RESOURCE_EXHAUSTED before doing
# anything: the call is tried again after a jittered, doubling backoff.
_INITIAL_BACKOFF = 0.02
_MAX_BACKOFF = 2.0
_MAX_RETRY_WINDOW = 300.0
# torch's own default store timeout.
DEFAULT_TIMEOUT = datetime.timedelta(minutes=5)


class RendezvousStore(dist.Store):
    """RendezvousService as a torch.distributed.Store (what
    engine/dist/grpc_store.cc is to the engine):

      set(key, value)      -> KvSet
      get(key)             -> KvWait([key], the store's timeout)
      add(key, delta)      -> KvAdd (atomic; the value is decimal text)
      wait(keys[, timeout])-> KvWait(keys, timeout)
      check(keys)          -> KvGet of each key, no waiting

    compare_set, delete_key and num_keys have no RPC and raise
    RingmasterError; neither the Gloo nor the NCCL process group uses them.
    A key not set within the timeout raises StoreTimeoutError
    (DEADLINE_EXCEEDED); a fenced generation GenerationOverError; an
    unreachable worker RingmasterError with code UNAVAILABLE. Every message
    starts with "ringmaster store <target>: ". Thread-safe."""

    def __init__(self, ctx: RankContext, timeout: datetime.timedelta = DEFAULT_TIMEOUT):
        super().__init__()
        self.set_timeout(timeout)
        if not ctx.rendezvous.startswith("grpc:"):
            raise RingmasterError("ringmaster store: rendezvous address %r: only a worker's grpc: rendezvous is "
                                  "supported (use MASTER_ADDR otherwise)" % ctx.rendezvous)
        address = ctx.rendezvous[len("grpc:"):]
        self._target = address
        self._scope = rdv.RendezvousScope(job_id=ctx.job_id, generation=ctx.generation, rank=ctx.rank,
                                          secret=ctx.rendezvous_secret)
        self._metadata = ((RANK_SECRET_HEADER, ctx.rendezvous_secret),)
        self._channel = open_channel(address)
        self._stub = rdv_grpc.RendezvousServiceStub(self._channel)

    def set(self, key: str, value) -> None:
        value = value.encode() if isinstance(value, str) else bytes(value)
        request = rdv.KvSetRequest(scope=self._scope, key=key, value=value)
        self._call("set '%s'" % key, None, RPC_TIMEOUT_SECONDS, lambda t: self._stub.KvSet(
            request, timeout=t, metadata=self._metadata))

    def get(self, key: str) -> bytes:
        return self._wait_for([key], self.timeout.total_seconds())[0]

    def add(self, key: str, delta: int) -> int:
        request = rdv.KvAddRequest(scope=self._scope, key=key, delta=delta)
        # RESOURCE_EXHAUSTED is answered before anything is added: retrying is safe.
        return self._call("add to key '%s'" % key, None, RPC_TIMEOUT_SECONDS, lambda t: self._stub.KvAdd(
            request, timeout=t, metadata=self._metadata)).value

    def wait(self, keys: List[str], timeout: Optional[datetime.timedelta] = None) -> None:
        if keys:
            self._wait_for(list(keys), (timeout or self.timeout).total_seconds())

    def check(self, keys: List[str]) -> bool:
        for key in keys:
            request = rdv.KvGetRequest(scope=self._scope, key=key)
            found = self._call("get '%s'" % key, None, RPC_TIMEOUT_SECONDS, lambda t: self._stub.KvGet(
                request, timeout=t, metadata=self._metadata)).found
            if not found:
                return False
        return True

    def compare_set(self, key, expected, desired):
        raise self._unsupported("compare_set")

    def delete_key(self, key):
        raise self._unsupported("delete_key")

    def num_keys(self):
        raise self._unsupported("num_keys")

    def _unsupported(self, what: str) -> RingmasterError:
        return RingmasterError("ringmaster store %s: %s: the rendezvous service has no such operation "
                               "(Gloo and NCCL process groups do not need it)" % (self._target, what),
                               grpc.StatusCode.UNIMPLEMENTED)

    def _wait_for(self, keys: List[str], timeout: float) -> List[bytes]:
        # A non-positive timeout means "do not wait": ask for the least wait.
        timeout = max(timeout, 1e-9)
        give_up = time.monotonic() + timeout

        def attempt(grpc_timeout: float):
            request = rdv.KvWaitRequest(scope=self._scope, keys=keys)
            request.timeout.FromNanoseconds(max(int((give_up - time.monotonic()) * 1e9), 1))
            return self._stub.KvWait(request, timeout=grpc_timeout, metadata=self._metadata)

        response = self._call("wait", keys, timeout + _DEADLINE_SLACK, attempt, timeout)
        if len(response.values) != len(keys):
            raise RingmasterError("ringmaster store %s: wait for %d keys returned %d values"
                                  % (self._target, len(keys), len(response.values)))
        return list(response.values)

    def _call(self, what: str, keys: Optional[List[str]], seconds: float, call: Callable[[float], T],
              wait: float = 0.0) -> T:
        """`call(grpc timeout)` within `seconds`, again after a backoff while
        the coordinator answers RESOURCE_EXHAUSTED; the SDK error otherwise."""
        start = time.monotonic()
        deadline = start + seconds
        give_up = min(deadline, start + _MAX_RETRY_WINDOW)
        backoff = _INITIAL_BACKOFF
        while True:
            try:
                return call(max(deadline - time.monotonic(), 1e-3))
            except grpc.RpcError as e:
                sleep = backoff * (0.5 + 0.5 * random.random())  # callers turned away together come back apart
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() + sleep >= give_up:
                    raise self._error(what, keys, wait, e) from None
            time.sleep(sleep)
            backoff = min(backoff * 2, _MAX_BACKOFF)

    def _error(self, what: str, keys: Optional[List[str]], wait: float, e: grpc.RpcError) -> RingmasterError:
        where = "ringmaster store %s" % self._target
        if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            if keys:
                phrase = ("key '%s' was" % keys[0]) if len(keys) == 1 else (
                    "keys %s were" % ", ".join("'%s'" % k for k in keys))
                return StoreTimeoutError("%s: %s not set within %gs" % (where, phrase, wait), e.code())
            return StoreTimeoutError("%s: %s: no answer within %gs" % (where, what, RPC_TIMEOUT_SECONDS), e.code())
        return from_rpc("%s: %s" % (where, what), e)


def store(timeout: datetime.timedelta = DEFAULT_TIMEOUT) -> RendezvousStore:
    """A Store over this job generation's rendezvous key-value service
    (calls ringmaster.init() if it was not). `timeout`: how long get() and
    wait() wait for a key."""
    return RendezvousStore(ringmaster.init(), timeout)


def should_checkpoint_and_exit() -> bool:
    """ringmaster.should_checkpoint_and_exit(), agreed across the ranks: with
    torch.distributed initialised, one all_reduce(MAX) of the ranks' answers
    (every rank must call it at the same step, as any collective); without,
    this rank's own answer."""
    local = ringmaster.should_checkpoint_and_exit()
    if not (dist.is_available() and dist.is_initialized()):
        return local
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    flag = torch.tensor([1 if local else 0], dtype=torch.int32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())
