"""The rank context: who this rank is, as the worker that started it wrote
it (proto/rank_context.proto, protobuf JSON, in the file named by
RINGMASTER_RANK_CONTEXT)."""

import dataclasses
import os
from typing import Optional, Tuple

from google.protobuf import json_format

from ringmaster._proto import rank_context_pb2
from ringmaster.errors import NotUnderWorkerError, RankContextError

CONTEXT_ENV = "RINGMASTER_RANK_CONTEXT"


@dataclasses.dataclass(frozen=True)
class CheckpointFile:
    """One file of a committed checkpoint, as the coordinator recorded it."""

    path: str  # relative to the checkpoint's directory, '/'-separated
    size_bytes: int
    sha256: str  # 64 lower-case hex digits ("" if recorded with another algorithm)


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A committed checkpoint (proto CheckpointInfo)."""

    generation: int  # the generation that wrote it
    step: int  # optimizer steps completed when it was taken
    path: str  # absolute directory holding its files
    files: Tuple[CheckpointFile, ...]


@dataclasses.dataclass(frozen=True)
class RankContext:
    """This rank in its job generation. Ranks are global unless named
    otherwise; a node's ranks are local_rank 0 .. local_world_size - 1."""

    job_id: str
    generation: int  # >= 1; every call to the worker carries it (fencing)
    rank: int  # global rank, in [0, world_size)
    world_size: int
    local_rank: int  # among the job's ranks on this node
    local_world_size: int  # the job's ranks on each node
    node_rank: int  # this node among the generation's nodes, in [0, nodes)
    nodes: int
    pipeline: int  # pipeline stages of the generation (1 for most programs)
    checkpoint_dir: str  # where this generation writes (absolute); "" for none
    resume_from: Optional[Checkpoint]  # the committed checkpoint to resume from
    device: str  # "cpu" or "cuda"
    gpu_uuid: str  # the rank's GPU under CUDA (also CUDA_VISIBLE_DEVICES); "" otherwise
    checkpoint_interval_steps: int  # the spec's checkpoint.interval_steps (0: only at the end)
    agent: str  # the worker's socket, "unix:/path/agent.sock"
    rendezvous: str  # "grpc:unix:/path/agent.sock" under a worker (proto RendezvousEndpoint.address)
    rendezvous_secret: str = dataclasses.field(repr=False)  # never logged
    rendezvous_deadline: Optional[float] = None  # seconds since the epoch; None: no deadline
    checkpoint_roots: Tuple[str, ...] = ()
    path: str = ""  # the rank.json this was read from


def load(path: Optional[str] = None) -> RankContext:
    """Reads the rank context from `path`, or from the file named by
    RINGMASTER_RANK_CONTEXT. NotUnderWorkerError when neither is given;
    RankContextError when the file cannot be read or parsed, or names no
    job or no worker socket."""
    if path is None:
        path = os.environ.get(CONTEXT_ENV, "")
        if not path:
            raise NotUnderWorkerError(
                "%s is not set: this process was not started by a Ringmaster worker "
                "(run it with `ringmaster submit`, or without the SDK under torchrun)" % CONTEXT_ENV)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise RankContextError("rank context %s: cannot read it: %s" % (path, e.strerror)) from e
    message = rank_context_pb2.RankContext()
    try:
        # A newer worker may write fields this SDK does not know yet.
        json_format.Parse(text, message, ignore_unknown_fields=True)
    except json_format.ParseError as e:
        raise RankContextError("rank context %s: not a rank context: %s" % (path, e)) from e
    if not message.job_id:
        raise RankContextError("rank context %s: job_id: empty" % path)
    if not message.agent:
        raise RankContextError("rank context %s: agent: empty (no worker socket to talk to)" % path)
    return _from_proto(message, path)


def _from_proto(m: rank_context_pb2.RankContext, path: str) -> RankContext:
    resume = None
    if m.HasField("resume_from") and m.resume_from.path:
        files = tuple(
            CheckpointFile(f.path, f.size_bytes, f.checksum.hex if f.checksum.algorithm == f.checksum.SHA256 else "")
            for shard in m.resume_from.shards for f in shard.files)
        resume = Checkpoint(m.resume_from.generation, m.resume_from.step, m.resume_from.path, files)
    deadline = None
    if m.rendezvous.HasField("deadline"):
        deadline = m.rendezvous.deadline.seconds + m.rendezvous.deadline.nanos / 1e9
    interval = m.spec.checkpoint.interval_steps if m.spec.checkpoint.HasField("interval_steps") else 1000
    return RankContext(
        job_id=m.job_id,
        generation=m.generation,
        rank=m.rank.global_rank,
        world_size=m.world.world_size,
        local_rank=m.rank.local_rank,
        local_world_size=m.world.ranks_per_node,
        node_rank=m.rank.node_rank,
        nodes=m.world.nodes,
        pipeline=max(1, m.world.pipeline),
        checkpoint_dir=m.checkpoint_dir,
        resume_from=resume,
        device="cuda" if m.device.kind == m.device.CUDA else "cpu",
        gpu_uuid=m.device.gpu_uuid,
        checkpoint_interval_steps=interval,
        agent=m.agent,
        rendezvous=m.rendezvous.address,
        rendezvous_secret=m.rendezvous.secret,
        rendezvous_deadline=deadline,
        checkpoint_roots=tuple(m.checkpoint_roots),
        path=path,
    )
