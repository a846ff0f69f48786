"""FakeAgent: a hand-written stand-in for a worker's agent socket, serving
AgentService, RendezvousService and CheckpointService on a Unix socket, with
every call recorded. It applies the rules the real worker and coordinator
apply and the SDK relies on: the rank secret (metadata and scope), fencing
by generation (FAILED_PRECONDITION), KvWait's timeout (DEADLINE_EXCEEDED),
KvAdd on decimal text, commits only from global rank 0 at the coordinator's
path, keep-K retention answered with prune_paths."""

import os
import tempfile
import threading
from concurrent import futures
from typing import Dict, List, Optional, Tuple

import grpc

from ringmaster._proto import (agent_service_pb2, agent_service_pb2_grpc, checkpoint_pb2, checkpoint_service_pb2,
                               checkpoint_service_pb2_grpc, rendezvous_service_pb2, rendezvous_service_pb2_grpc)

SECRET = "s3cret"
SECRET_HEADER = "x-ringmaster-rank-secret"


class FakeAgent:
    """Start with start(); stop() removes the socket. Thread-safe."""

    def __init__(self, job_id: str = "j-1", generation: int = 1, keep: int = 2, base: Optional[str] = None):
        self.dir = tempfile.mkdtemp(prefix="ringmaster-fake-agent-")
        self.socket = os.path.join(self.dir, "agent.sock")
        self.job_id = job_id
        self.generation = generation  # the current generation; older ones are fenced
        self.keep = keep
        self.base = base or os.path.join(self.dir, "ckpt")  # the checkpoint root
        self.lock = threading.Condition()
        self.calls: List[Tuple[str, object]] = []  # (method, request), in order
        self.kv: Dict[str, bytes] = {}
        self.committed: List[checkpoint_pb2.CheckpointInfo] = []
        self.answer_stop = False
        self.checkpoint_ranks = set()  # ranks whose reports are answered checkpoint=true
        self.commit_error: Optional[Tuple[grpc.StatusCode, str]] = None
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        agent_service_pb2_grpc.add_AgentServiceServicer_to_server(_Agent(self), self.server)
        rendezvous_service_pb2_grpc.add_RendezvousServiceServicer_to_server(_Rendezvous(self), self.server)
        checkpoint_service_pb2_grpc.add_CheckpointServiceServicer_to_server(_Checkpoints(self), self.server)

    @property
    def target(self) -> str:
        return "unix:" + self.socket

    def generation_dir(self, generation: Optional[int] = None) -> str:
        return os.path.join(self.base, self.job_id, "gen-%d" % (generation or self.generation))

    def start(self) -> "FakeAgent":
        self.server.add_insecure_port(self.target)
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop(grace=None).wait()
        with self.lock:
            self.lock.notify_all()

    def record(self, method: str, request) -> None:
        with self.lock:
            self.calls.append((method, request))
            self.lock.notify_all()

    def requests(self, method: str) -> list:
        with self.lock:
            return [r for m, r in self.calls if m == method]

    def wait_for_calls(self, method: str, count: int, timeout: float = 5.0) -> list:
        with self.lock:
            self.lock.wait_for(lambda: len([1 for m, _ in self.calls if m == method]) >= count, timeout)
        return self.requests(method)

    def write_context(self, rank: int = 0, world_size: int = 1, generation: Optional[int] = None,
                      resume_from: Optional[checkpoint_pb2.CheckpointInfo] = None, secret: str = SECRET) -> str:
        """A rank.json as the worker writes it; returns its path."""
        from google.protobuf import json_format
        from ringmaster._proto import rank_context_pb2
        generation = generation or self.generation
        ctx = rank_context_pb2.RankContext(job_id=self.job_id, generation=generation, agent=self.target,
                                           checkpoint_dir=self.generation_dir(generation))
        ctx.rank.global_rank = rank
        ctx.rank.local_rank = rank
        ctx.world.world_size = world_size
        ctx.world.data = world_size
        ctx.world.pipeline = 1
        ctx.world.nodes = 1
        ctx.world.ranks_per_node = world_size
        ctx.rendezvous.address = "grpc:" + self.target
        ctx.rendezvous.secret = secret
        ctx.spec.checkpoint.interval_steps = 5
        ctx.device.kind = ctx.device.CPU
        ctx.checkpoint_roots.append(self.base)
        if resume_from is not None:
            ctx.resume_from.CopyFrom(resume_from)
        path = os.path.join(self.dir, "rank-%d.json" % rank)
        with open(path, "w") as f:
            f.write(json_format.MessageToJson(ctx, preserving_proto_field_name=True))
        return path

    # The checks the worker and the coordinator make, as gRPC errors.
    def fence(self, context, job_id: str, generation: int, secret: Optional[str]) -> None:
        if secret is not None and secret != SECRET:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "not the secret of job %s" % job_id)
        if job_id != self.job_id or generation != self.generation:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          "generation %d is over; current is %d" % (generation, self.generation))


def _metadata_secret(context) -> str:
    return dict(context.invocation_metadata()).get(SECRET_HEADER, "")


class _Agent(agent_service_pb2_grpc.AgentServiceServicer):
    def __init__(self, fake: FakeAgent):
        self.fake = fake

    def ReportMetrics(self, request, context):
        self.fake.record("ReportMetrics", request)
        if request.job_id != self.fake.job_id:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "job %s does not run here" % request.job_id)
        if request.generation != self.fake.generation:  # the worker answers an old generation with stop
            return agent_service_pb2.ReportMetricsResponse(stop=True)
        if _metadata_secret(context) != SECRET:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "x-ringmaster-rank-secret: not the secret")
        return agent_service_pb2.ReportMetricsResponse(stop=self.fake.answer_stop,
                                                       checkpoint=request.global_rank in self.fake.checkpoint_ranks)


class _Rendezvous(rendezvous_service_pb2_grpc.RendezvousServiceServicer):
    def __init__(self, fake: FakeAgent):
        self.fake = fake

    def _scoped(self, name, request, context):
        self.fake.record(name, request)
        s = request.scope
        self.fake.fence(context, s.job_id, s.generation, s.secret)

    def KvSet(self, request, context):
        self._scoped("KvSet", request, context)
        with self.fake.lock:
            self.fake.kv[request.key] = request.value
            self.fake.lock.notify_all()
        return rendezvous_service_pb2.KvSetResponse()

    def KvGet(self, request, context):
        self._scoped("KvGet", request, context)
        with self.fake.lock:
            value = self.fake.kv.get(request.key)
        return rendezvous_service_pb2.KvGetResponse(found=value is not None, value=value or b"")

    def KvAdd(self, request, context):
        self._scoped("KvAdd", request, context)
        with self.fake.lock:
            old = self.fake.kv.get(request.key, b"0")
            try:
                value = int(old) + request.delta
            except ValueError:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "key '%s' is not an integer" % request.key)
            self.fake.kv[request.key] = str(value).encode()
            self.fake.lock.notify_all()
        return rendezvous_service_pb2.KvAddResponse(value=value)

    def KvWait(self, request, context):
        self._scoped("KvWait", request, context)
        timeout = request.timeout.ToNanoseconds() / 1e9 if request.HasField("timeout") else 60.0
        with self.fake.lock:
            done = self.fake.lock.wait_for(
                lambda: all(k in self.fake.kv for k in request.keys) or not context.is_active(), timeout)
            if not done or not context.is_active():
                missing = [k for k in request.keys if k not in self.fake.kv]
                context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "keys %s were not set in time" % missing)
            values = [self.fake.kv[k] for k in request.keys]
        return rendezvous_service_pb2.KvWaitResponse(values=values)


class _Checkpoints(checkpoint_service_pb2_grpc.CheckpointServiceServicer):
    def __init__(self, fake: FakeAgent):
        self.fake = fake

    def Commit(self, request, context):
        fake = self.fake
        fake.record("Commit", request)
        fake.fence(context, request.job_id, request.generation, _metadata_secret(context))
        if fake.commit_error is not None:
            context.abort(*fake.commit_error)
        if request.rank != 0 or not request.whole_model or not request.files:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "rank: only global rank 0 commits a whole model")
        expected = os.path.join(fake.generation_dir(request.generation), "step-%09d" % request.step)
        if request.path != expected:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "path: %s is not %s" % (request.path, expected))
        info = checkpoint_pb2.CheckpointInfo(job_id=request.job_id, generation=request.generation,
                                             step=request.step, path=request.path, pipeline_stages=1,
                                             complete=True, whole_model=True)
        info.shards.add(pipeline_stage=0, rank=0, files=request.files)
        with fake.lock:
            fake.committed = [c for c in fake.committed if c.path != info.path] + [info]
            fake.committed.sort(key=lambda c: (c.step, c.generation))
            pruned = fake.committed[:-fake.keep] if len(fake.committed) > fake.keep else []
            fake.committed = fake.committed[len(pruned):]
        return checkpoint_service_pb2.CommitCheckpointResponse(checkpoint=info, prune_paths=[c.path for c in pruned])

    def ReportDamaged(self, request, context):
        self.fake.record("ReportDamaged", request)
        self.fake.fence(context, request.job_id, request.generation, _metadata_secret(context))
        return checkpoint_service_pb2.ReportDamagedCheckpointResponse()
