"""Checkpoints of a program, laid out and committed as the engine's
(common/checkpoint_layout.h, engine/train/agent_client.cc):

  <checkpoint_dir>/step-<step, at least 9 digits>/<the program's files>

where checkpoint_dir is the generation's, "<base>/<job id>/gen-<g>". Global
rank 0 writes every file of a step (the whole model, gathered), then commits
them: each file is fsynced and hashed (SHA-256, size in bytes), the
directories are fsynced, and the coordinator records the files. Only
committed checkpoints are ever resumed from; the coordinator keeps the
newest `checkpoint.keep` and answers each commit with the directories that
fell out of retention, which the committer deletes.

Beneath an operator's checkpoint root (RankContext.checkpoint_roots) no
symbolic link is followed: a link in place of a directory or a file is
refused, and nothing is read or removed through it."""

import hashlib
import logging
import os
import shutil
from typing import Iterable, List, Sequence, Tuple

from ringmaster.errors import CheckpointError

_log = logging.getLogger("ringmaster")
_CHUNK = 1 << 20


def step_name(step: int) -> str:
    """"step-000001230" (common/checkpoint_layout.h)."""
    return "step-%09d" % step


def step_dir(generation_dir: str, step: int) -> str:
    return os.path.join(generation_dir, step_name(step))


def root_of(path: str, roots: Sequence[str]) -> str:
    """The deepest of `roots` that holds `path` (by components); "" when
    `roots` is empty (each directory is its own root). CheckpointError when
    none holds it."""
    if not roots:
        return ""
    best = ""
    for root in roots:
        norm = os.path.normpath(root)
        if (path == norm or path.startswith(norm.rstrip("/") + "/")) and len(norm) > len(best):
            best = norm
    if not best:
        raise CheckpointError("%s: not beneath a checkpoint root (%s)" % (path, ", ".join(roots)))
    return best


def check_no_links(path: str, root: str) -> None:
    """CheckpointError naming the first symbolic link among `path` and its
    directories below `root` ("" : only `path` itself is checked)."""
    tail = os.path.relpath(path, root) if root else os.path.basename(path)
    current = root if root else os.path.dirname(path)
    for part in tail.split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current):
            raise CheckpointError("%s: is a symbolic link: a checkpoint is never read or written through one"
                                  % current)


def hash_file(path: str) -> Tuple[int, str]:
    """(size in bytes, SHA-256 lower-case hex) of the file, fsynced first;
    the file is opened without following a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise CheckpointError("%s: cannot open it: %s" % (path, e.strerror)) from e
    with os.fdopen(fd, "rb") as f:
        os.fsync(fd)
        digest = hashlib.sha256()
        size = 0
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def relative_files(directory: str, files: Iterable[str]) -> List[str]:
    """`files` (absolute, or relative to `directory`) as '/'-separated paths
    relative to `directory`. CheckpointError for none, one outside it, or a
    repeated one."""
    out: List[str] = []
    for f in files:
        full = os.path.normpath(f if os.path.isabs(f) else os.path.join(directory, f))
        rel = os.path.relpath(full, directory)
        if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
            raise CheckpointError("files: %s is not inside the step's directory %s" % (f, directory))
        if rel in out:
            raise CheckpointError("files: %s is listed twice" % rel)
        out.append(rel)
    if not out:
        raise CheckpointError("files: at least one file is required")
    return out


def verify(directory: str, files: Sequence[Tuple[str, int, str]], root: str) -> None:
    """CheckpointError naming the first file of `files` (path, size, sha256)
    that is missing or differs from its record."""
    for rel, size, sha256 in files:
        path = os.path.join(directory, rel)
        check_no_links(path, root)
        got_size, got_sha = hash_file(path)
        if got_size != size:
            raise CheckpointError("%s: %d bytes, %d recorded at commit" % (rel, got_size, size))
        if sha256 and got_sha != sha256:
            raise CheckpointError("%s: sha256 mismatch" % rel)


def prune(committed: str, prune_paths: Sequence[str], roots: Sequence[str]) -> None:
    """Deletes the checkpoint directories the coordinator pruned: only
    <job dir>/gen-<g>/step-<n> siblings of `committed`'s job directory, each
    renamed to a ".tmp-" name first (out of readers' sight), then removed
    without following a link; an older generation's directory goes with its
    last checkpoint. A failure is logged, not raised: the checkpoint is
    committed whatever happens here."""
    generation_dir = os.path.dirname(committed)
    job_dir = os.path.dirname(generation_dir)
    for pruned in prune_paths:
        pruned_generation = os.path.dirname(pruned)
        if os.path.dirname(pruned_generation) != job_dir:
            _log.warning("not pruning %s: outside the job's checkpoint directory %s", pruned, job_dir)
            continue
        try:
            check_no_links(pruned, root_of(pruned, roots) or job_dir)
            hidden = os.path.join(pruned_generation, ".tmp-" + os.path.basename(pruned))
            if os.path.lexists(pruned):
                os.rename(pruned, hidden)
            if os.path.lexists(hidden):
                shutil.rmtree(hidden)
            if pruned_generation != generation_dir and not os.listdir(pruned_generation):
                os.rmdir(pruned_generation)
        except (OSError, CheckpointError) as e:
            _log.warning("could not remove pruned checkpoint %s: %s", pruned, e)
