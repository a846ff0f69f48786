"""Ringmaster's SDK for programs a Ringmaster worker starts (python/README.md).

    import ringmaster
    ctx = ringmaster.init()                  # who this rank is
    start = 0
    ckpt = ringmaster.resume_checkpoint()    # committed checkpoint, or None
    if ckpt: start = load(ckpt.path)
    for step in range(start, total):
        ...
        ringmaster.report(step + 1, loss=loss, samples=samples_per_s, total_steps=total)
        if ctx.rank == 0 and (step + 1) % every == 0:
            save(ringmaster.checkpoint_dir(step + 1))
            ringmaster.commit(step + 1, ["model.pt"])
        if ringmaster.should_checkpoint_and_exit(): ...

Module-level functions, like torch.distributed's: init() once per process,
then the others. Thread-safe.
"""

import atexit
import os
import re
import resource
import threading
from typing import Iterable, Optional

from google.protobuf.descriptor import FieldDescriptor

from ringmaster import checkpoint as _ckpt
from ringmaster._proto import checkpoint_pb2, checkpoint_service_pb2, job_pb2
from ringmaster.agent import RPC_TIMEOUT_SECONDS, AgentClient
from ringmaster.context import CONTEXT_ENV, Checkpoint, CheckpointFile, RankContext, load
from ringmaster.errors import (CheckpointError, GenerationOverError, NotUnderWorkerError, RankContextError,
                               RingmasterError, StoreTimeoutError)

__all__ = [
    "Checkpoint", "CheckpointError", "CheckpointFile", "GenerationOverError", "NotUnderWorkerError",
    "RankContext", "RankContextError", "RingmasterError", "StoreTimeoutError", "checkpoint_dir", "commit",
    "context", "init", "report", "resume_checkpoint", "should_checkpoint_and_exit", "shutdown", "under_worker",
]

_lock = threading.Lock()
_context: Optional[RankContext] = None  # guarded by _lock
_client: Optional[AgentClient] = None  # guarded by _lock

# report() names that are not StepMetrics fields of the same name.
_ALIASES = {"samples": "samples_per_second", "tokens": "tokens_per_second"}
_DESCRIPTOR = job_pb2.StepMetrics.DESCRIPTOR
_FIELDS = frozenset(f.name for f in _DESCRIPTOR.fields) - {"step", "time", "gauges"}
_GAUGE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def under_worker() -> bool:
    """True when a worker started this process (RINGMASTER_RANK_CONTEXT is
    set): a program can then call init(), and fall back to plain torchrun
    conventions otherwise."""
    return bool(os.environ.get(CONTEXT_ENV))


def init(path: Optional[str] = None, report_interval: float = 1.0, commit_patience: float = 300.0) -> RankContext:
    """Reads this rank's context and opens the line to the worker. `path`:
    the rank.json (default: $RINGMASTER_RANK_CONTEXT); `report_interval`:
    seconds between two metric reports at most (the latest wins);
    `commit_patience`: seconds a commit waits for an unreachable
    coordinator. A second call returns the first's context.

    Raises NotUnderWorkerError when RINGMASTER_RANK_CONTEXT is not set (no
    worker started this process), RankContextError when the file cannot be
    read or parsed."""
    global _context, _client
    with _lock:
        if _context is not None:
            return _context
        ctx = load(path)
        _client = AgentClient(ctx, interval=report_interval, patience=commit_patience)
        _context = ctx
    return ctx


def context() -> RankContext:
    """The context init() read. NotUnderWorkerError before init()."""
    return _session()[0]


def shutdown(timeout: float = 2.0) -> None:
    """Sends the last report (waiting up to `timeout` seconds) and closes
    the line to the worker; init() may be called again. Also run at exit."""
    global _context, _client
    with _lock:
        client, _client, _context = _client, None, None
    if client is not None:
        client.close(timeout)


atexit.register(shutdown)


def _session():
    with _lock:
        if _context is None:
            raise NotUnderWorkerError("ringmaster.init() has not been called")
        return _context, _client


def report(step: int, **metrics: float) -> None:
    """Reports this rank's progress after `step` optimizer steps; never
    blocks (a thread sends the latest report at most every report_interval).

    Names and units (proto/job.proto StepMetrics; the worker exports each as
    ringmaster_rank_<name> on its /metrics, as for the engine's trainer):
      loss          training loss of the last step
      samples       samples per second, global (all ranks)
      tokens        tokens per second, global
      loss_scale    current fp16 loss scale (0: not fp16)
      total_steps   steps the job will run in all (the CLI's progress line)
    and any other StepMetrics field by its name: epoch, grad_norm,
    learning_rate, step_time_seconds, communication_seconds,
    data_wait_seconds, memory_bytes (default: this process's peak RSS),
    eval_loss, eval_accuracy, eval_step, skipped_steps, ... Any other name
    is the program's own gauge (StepMetrics.gauges), exported as
    ringmaster_rank_gauge{name="<name>"}: at most 64 names of
    [A-Za-z_][A-Za-z0-9_]*, at most 64 characters each. Rank 0's report is
    the job's progress.

    ValueError for a negative step or a name that is neither, TypeError for
    a value that is not a number, NotUnderWorkerError before init()."""
    _, client = _session()
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError("report: step must be an integer >= 0, got %r" % (step,))
    message = job_pb2.StepMetrics(step=step)
    for name, value in metrics.items():
        field = _ALIASES.get(name, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                value = float(value)  # a 0-d tensor or numpy scalar
            except (TypeError, ValueError):
                raise TypeError("report: %s: a number is required, got %r" % (name, value)) from None
        if field not in _FIELDS:
            if not _GAUGE_NAME.fullmatch(name) or (name not in message.gauges and len(message.gauges) >= 64):
                raise ValueError("report: %s: not a step metric (%s) nor a gauge name (at most 64 names of "
                                 "[A-Za-z_][A-Za-z0-9_]*, 64 characters each)"
                                 % (name, ", ".join(sorted(set(_ALIASES) | _FIELDS))))
            message.gauges[name] = float(value)
            continue
        is_double = _DESCRIPTOR.fields_by_name[field].cpp_type == FieldDescriptor.CPPTYPE_DOUBLE
        setattr(message, field, float(value) if is_double else int(value))
    if "memory_bytes" not in metrics:
        message.memory_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    message.time.GetCurrentTime()
    client.report(message)


def should_checkpoint_and_exit() -> bool:
    """True once a report's answer said the job must save now (a drain or a
    preemption: checkpoint, commit, then exit or train on until stopped) or
    that this generation is over (stop). Learned from the answers to
    report(): a rank that does not report never learns it, and ranks may
    see it one step apart; ringmaster.torch.should_checkpoint_and_exit()
    agrees across ranks. NotUnderWorkerError before init()."""
    _, client = _session()
    return client.checkpoint_requested() or client.stop_requested()


def checkpoint_dir(step: int) -> str:
    """The directory the checkpoint of `step` is written to,
    <context().checkpoint_dir>/step-NNNNNNNNN, created if missing (on rank
    0; other ranks get the path only). CheckpointError when the job has no
    checkpoint directory or the path crosses a symbolic link."""
    ctx, _ = _session()
    if not ctx.checkpoint_dir:
        raise CheckpointError("checkpoint_dir: this job has no checkpoint directory")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError("checkpoint_dir: step must be an integer >= 0, got %r" % (step,))
    path = _ckpt.step_dir(ctx.checkpoint_dir, step)
    if ctx.rank == 0:
        _ckpt.check_no_links(path, _ckpt.root_of(path, ctx.checkpoint_roots))
        os.makedirs(path, exist_ok=True)
    return path


def commit(step: int, files: Iterable[str]) -> Checkpoint:
    """Commits the checkpoint of `step`: `files` (relative to, or inside,
    checkpoint_dir(step)) are fsynced, their sizes and SHA-256 recorded by
    the coordinator, and the checkpoints that fell out of retention
    (checkpoint.keep) deleted. Global rank 0 only: it writes the whole
    model. Blocks; retried for up to commit_patience while the coordinator
    cannot be reached. Returns the committed checkpoint.

    CheckpointError for a missing file, a file outside the directory, a
    rank other than 0, or a commit the coordinator refused;
    GenerationOverError when this generation is over (nothing recorded: the
    rank must exit)."""
    ctx, client = _session()
    if ctx.rank != 0:
        raise CheckpointError("commit: only global rank 0 commits a checkpoint (the whole model, gathered); "
                              "this is rank %d" % ctx.rank)
    directory = _ckpt.step_dir(ctx.checkpoint_dir, step) if ctx.checkpoint_dir else ""
    if not directory:
        raise CheckpointError("commit: this job has no checkpoint directory")
    root = _ckpt.root_of(directory, ctx.checkpoint_roots)
    request = checkpoint_service_pb2.CommitCheckpointRequest(
        job_id=ctx.job_id, generation=ctx.generation, step=step, path=directory, rank=ctx.rank,
        pipeline_stage=0, pipeline_stages=ctx.pipeline, whole_model=True,
        write_seconds=client.seconds_since_report())
    for rel in _ckpt.relative_files(directory, files):
        path = os.path.join(directory, rel)
        _ckpt.check_no_links(path, root)
        size, sha256 = _ckpt.hash_file(path)
        request.files.add(path=rel.replace(os.sep, "/"), size_bytes=size,
                          checksum=checkpoint_pb2.FileChecksum(algorithm=checkpoint_pb2.FileChecksum.SHA256,
                                                               hex=sha256))
    _ckpt.fsync_dir(directory)
    _ckpt.fsync_dir(os.path.dirname(directory))
    response = client.call_with_patience(
        "commit of checkpoint %s" % directory,
        lambda: client.checkpoints.Commit(request, timeout=RPC_TIMEOUT_SECONDS, metadata=client.metadata),
        CheckpointError)
    _ckpt.prune(directory, list(response.prune_paths), ctx.checkpoint_roots)
    info = response.checkpoint
    return Checkpoint(info.generation or ctx.generation, step, directory,
                      tuple(CheckpointFile(f.path, f.size_bytes, f.checksum.hex) for f in request.files))


def resume_checkpoint(verify: bool = True) -> Optional[Checkpoint]:
    """The committed checkpoint this generation resumes from, or None (start
    from step 0). With `verify`, every file is checked against the sizes and
    SHA-256 the coordinator recorded; a damaged checkpoint is reported to
    the coordinator (which restarts the job from an older one, without
    counting a restart) and raises CheckpointError: the rank must exit."""
    ctx, client = _session()
    ckpt = ctx.resume_from
    if ckpt is None or not verify:
        return ckpt
    try:
        _ckpt.verify(ckpt.path, [(f.path, f.size_bytes, f.sha256) for f in ckpt.files],
                     _ckpt.root_of(ckpt.path, ctx.checkpoint_roots))
    except CheckpointError as damage:
        request = checkpoint_service_pb2.ReportDamagedCheckpointRequest(
            job_id=ctx.job_id, generation=ctx.generation, rank=ctx.rank, checkpoint_generation=ckpt.generation,
            checkpoint_step=ckpt.step, reason=str(damage)[:1024])
        client.call_with_patience(
            "report of damaged checkpoint %s" % ckpt.path,
            lambda: client.checkpoints.ReportDamaged(request, timeout=RPC_TIMEOUT_SECONDS, metadata=client.metadata))
        raise CheckpointError("the committed checkpoint cannot be resumed from: %s: %s"
                              % (ckpt.path, damage)) from None
    return ckpt
