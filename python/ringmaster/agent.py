"""AgentClient: a rank's line to the worker that started it, over the
worker's agent socket: step metrics up (AgentService.ReportMetrics),
checkpoint commits up (CheckpointService), the coordinator's requests (stop;
checkpoint now) down. The same calls, metadata and retry rules as the
engine's trainer (engine/train/agent_client.cc).

report() never blocks the training step: it keeps the latest metrics and a
sender thread forwards them, at most one call every `interval` seconds (the
latest metrics win). Commits block, retried while the worker or the
coordinator cannot be reached. Thread-safe."""

import threading
import time
from typing import Callable, Optional, TypeVar

import grpc

from ringmaster._proto import agent_service_pb2, agent_service_pb2_grpc, checkpoint_service_pb2_grpc, job_pb2
from ringmaster.context import RankContext
from ringmaster.errors import RingmasterError, from_rpc

# The worker acts for a rank only on a call that presents its generation's
# secret (any local process reaches the socket): common/grpc_security.h.
RANK_SECRET_HEADER = "x-ringmaster-rank-secret"
# Every Ringmaster channel's message limit (common/grpc_security.h).
MAX_MESSAGE_BYTES = 32 << 20
# A call the worker does not answer within this fails (metrics: retried with
# the next report).
RPC_TIMEOUT_SECONDS = 10.0
# How long a commit waits for an unreachable worker or coordinator.
COMMIT_PATIENCE_SECONDS = 300.0

T = TypeVar("T")


def open_channel(target: str) -> grpc.Channel:
    """A plaintext channel to the worker's local socket (mode 0600/0666)."""
    return grpc.insecure_channel(target, options=[
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ])


class AgentClient:
    """See the module docstring. `patience`: seconds a commit is retried
    while UNAVAILABLE or DEADLINE_EXCEEDED."""

    def __init__(self, context: RankContext, interval: float = 1.0,
                 patience: float = COMMIT_PATIENCE_SECONDS):
        self._context = context
        self._interval = interval
        self._patience = patience
        self._metadata = ((RANK_SECRET_HEADER, context.rendezvous_secret),)
        self._channel = open_channel(context.agent)
        self.agent = agent_service_pb2_grpc.AgentServiceStub(self._channel)
        self.checkpoints = checkpoint_service_pb2_grpc.CheckpointServiceStub(self._channel)
        self._cv = threading.Condition()
        self._pending: Optional[job_pb2.StepMetrics] = None  # guarded by _cv
        self._in_flight = False  # guarded by _cv
        self._stop = False  # guarded by _cv
        self._checkpoint = False  # guarded by _cv
        self._last_report = None  # guarded by _cv: monotonic time of the last report()
        self._closed = False  # guarded by _cv
        self._sender = threading.Thread(target=self._send_loop, name="ringmaster-report", daemon=True)
        self._sender.start()

    @property
    def metadata(self):
        return self._metadata

    def report(self, metrics: job_pb2.StepMetrics) -> None:
        with self._cv:
            self._pending = metrics
            self._last_report = time.monotonic()
            self._cv.notify_all()

    def flush(self, timeout: float) -> bool:
        """Waits up to `timeout` seconds until the last report was answered
        (or failed). True if it was."""
        give_up = time.monotonic() + timeout
        with self._cv:
            while self._pending is not None or self._in_flight:
                left = give_up - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def close(self, timeout: float = 2.0) -> None:
        """Sends the last report (waiting up to `timeout` seconds), then
        closes the channel. Idempotent."""
        self.flush(timeout)
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._sender.join(timeout)
        self._channel.close()

    def stop_requested(self) -> bool:
        with self._cv:
            return self._stop

    def checkpoint_requested(self) -> bool:
        with self._cv:
            return self._checkpoint

    def seconds_since_report(self) -> float:
        """Seconds since the last report(); -1 if none (unknown write time)."""
        with self._cv:
            return -1.0 if self._last_report is None else time.monotonic() - self._last_report

    def _send_loop(self) -> None:
        ctx = self._context
        while True:
            with self._cv:
                while self._pending is None and not self._closed:
                    self._cv.wait()
                if self._pending is None:
                    return
                request = agent_service_pb2.ReportMetricsRequest(
                    job_id=ctx.job_id, generation=ctx.generation, global_rank=ctx.rank, metrics=self._pending)
                self._pending = None
                self._in_flight = True
            stop = checkpoint = False
            try:
                response = self.agent.ReportMetrics(request, timeout=RPC_TIMEOUT_SECONDS, metadata=self._metadata)
                stop, checkpoint = response.stop, response.checkpoint
            except grpc.RpcError as e:
                # The worker does not know this generation: it is over.
                stop = e.code() == grpc.StatusCode.FAILED_PRECONDITION
            with self._cv:
                self._in_flight = False
                self._stop = self._stop or stop
                self._checkpoint = self._checkpoint or checkpoint
                self._cv.notify_all()
                # At most one report per interval (the latest metrics win).
                self._cv.wait_for(lambda: self._closed, self._interval)

    def call_with_patience(self, what: str, call: Callable[[], T], error: type = RingmasterError) -> T:
        """Runs `call` until it is answered, retrying (training paused) for up
        to `patience` seconds while it is UNAVAILABLE or DEADLINE_EXCEEDED:
        commits are idempotent. Raises the SDK error for its status."""
        give_up = time.monotonic() + self._patience
        backoff = 0.25
        while True:
            try:
                return call()
            except grpc.RpcError as e:
                transient = e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                if not transient or time.monotonic() + backoff > give_up:
                    raise from_rpc(what, e, error) from None
            time.sleep(backoff)
            backoff = min(backoff * 2, 4.0)
