"""Reading and writing files: the project's one json-lines reader and its atomic writes (a file; a cache folder).

Written here rather than taken from a library because what matters is the error: every bad line
names its file and line number, and a reader can choose to skip such lines (and count them) when
a file may have been torn by a killed writer.
"""

from __future__ import annotations

import functools
import glob
import gzip
import hashlib
import json
import os
import platform
import re
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator, Optional


def cache_home() -> Path:
    """Where the project caches what it computed (Arrow tables of data files, contrastive encoders):
    ``$UDA_CACHE``, default ``~/.cache/uda``."""
    return Path(os.environ.get("UDA_CACHE", Path.home() / ".cache" / "uda")).expanduser()


def text_hash(text: str) -> bytes:
    """The 16-byte key of a text (BLAKE2b): how the augmentation cache and precomputed copies find a
    text without keeping it in memory. ``.hex()`` for json."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def is_gzip(path: str | os.PathLike) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def open_text(path: str | os.PathLike, mode: str = "rt") -> IO:
    """Open a text file for reading, gunzipping it when it is gzip (by content, not by name)."""
    if "r" in mode and is_gzip(path):
        return gzip.open(path, mode, encoding="utf-8")
    if "w" in mode and str(path).endswith(".gz"):
        return gzip.open(path, mode, encoding="utf-8")
    return open(path, mode, encoding="utf-8")


class BadLine(ValueError):
    """A json-lines line that is not UTF-8, not json, or not a json object; names file and line."""

    def __init__(self, path: str | os.PathLike, lineno: int, kind: str, reason: str, detail: str = "") -> None:
        super().__init__(f"'{path}', line {lineno}: {reason}")
        self.path, self.lineno, self.kind, self.reason, self.detail = str(path), lineno, kind, reason, detail


def iter_jsonl(path: str | os.PathLike, on_bad: str = "error",
               bad: Optional[list] = None) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line of a json-lines file (gzip or not).

    on_bad="error" raises :class:`BadLine` at the first line that is not UTF-8, not json or not an
    object; "skip" passes over it and, when ``bad`` is a list, appends the BadLine to it.
    """
    if on_bad not in ("error", "skip"):
        raise ValueError(f"on_bad must be 'error' or 'skip', got {on_bad!r}")
    opener = gzip.open if is_gzip(path) else open
    with opener(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                try:
                    line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
                except UnicodeDecodeError as e:
                    raise BadLine(path, lineno, "not UTF-8", f"not valid UTF-8 (byte {e.start})",
                                  f"byte {e.start}") from None
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise BadLine(path, lineno, "invalid JSON",
                                  f"invalid JSON ({e.msg} at column {e.colno})") from None
                if not isinstance(rec, dict):
                    raise BadLine(path, lineno, "not a JSON object", f"not a JSON object ({type(rec).__name__})",
                                  type(rec).__name__)
            except BadLine as b:
                if on_bad == "error":
                    raise
                if bad is not None:
                    bad.append(b)
                continue
            yield lineno, rec


def file_fingerprint(path: str | os.PathLike, block: int = 1 << 20) -> dict:
    """Size, modification time and a sha256 of the first and last ``block`` bytes of a file: enough to
    tell that a data file was replaced, grown, cut or edited at either end, without reading it all."""
    p = Path(path)
    st = p.stat()
    h = hashlib.sha256()
    with open(p, "rb") as f:
        h.update(f.read(block))
        if st.st_size > block:
            f.seek(max(block, st.st_size - block))
            h.update(f.read(block))
    return {"size": st.st_size, "mtime": st.st_mtime, "sha256_ends": h.hexdigest()}


_HOST = re.sub(r"[^A-Za-z0-9_-]", "_", platform.node()) or "host"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def pid_lock(path: Path, what: str, other: str, holder: str = "run", held: str = "the folder") -> Iterator[None]:
    """Hold ``path`` as a lock file (this process's PID and host) while the block runs, so that a second
    process doing the same work is refused. The messages name what is held (``what``: "output folder
    'runs/x'"; ``held``: "the folder"), who holds it (``holder``: "run") and what else the user can do
    (``other``: "choose another --output_dir"). A lock left by a
    process that no longer runs on this host (killed with SIGKILL, a crashed machine) is taken over with
    a warning; one held on another host is refused (a shared filesystem)."""
    from tqdm.auto import tqdm

    from uda.errors import ConfigError

    me = f"{os.getpid()} {platform.node()}"
    while True:
        try:
            with open(path, "x", encoding="utf-8") as f:
                f.write(me + "\n")
            break
        except FileExistsError:
            pid, _, host = path.read_text(encoding="utf-8").strip().partition(" ")
            if host != platform.node() and pid.isdigit():
                raise ConfigError(f"{what} is in use by process {pid} on host '{host}' (lock file '{path}'); wait "
                                  f"for that {holder} to end or {other}. If no {holder} is using {held}, delete the "
                                  f"lock file") from None
            if pid.isdigit() and pid_alive(int(pid)):
                raise ConfigError(f"{what} is in use by a running process ({pid}, lock file '{path}'); wait for "
                                  f"that {holder} to end, or {other}") from None
            tqdm.write(f"warning: {what} was locked by process {pid or '?'}, which is no longer running; taking "
                       f"its lock over")
            path.unlink(missing_ok=True)
    try:
        yield
    finally:
        if path.is_file() and path.read_text(encoding="utf-8").strip() == me:
            path.unlink()


def remove_stale_temporaries(folder: Path, name: Optional[str] = None) -> None:
    """Delete the temporary files that :func:`atomic_open` left in ``folder`` (for the file ``name`` only,
    when given) in processes of this host that no longer run (killed before they could clean up); those
    of running writers stay."""
    own = re.compile(r"\." + (re.escape(name) if name else ".+") + r"\.([A-Za-z0-9_-]+)@(\d+)\.[a-z0-9_]+\.tmp")
    for p in Path(folder).glob(f".{glob.escape(name) if name else '*'}.*.tmp"):
        m = own.fullmatch(p.name)
        if m and m.group(1) == _HOST and not pid_alive(int(m.group(2))):
            p.unlink(missing_ok=True)


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", fsync: bool = True, clean: bool = True) -> Iterator[IO]:
    """Write ``path`` all or nothing: into a temporary file beside it, synced, then renamed over it.
    A ``.gz`` name is gzipped. Readers never see a half-written file; on an error the old file stays.
    The temporary file is named after this host and process, so that a later write of ``path`` removes
    it when a kill (SIGKILL, a lost machine) kept this one from doing so (``clean=False``: not looked
    for, as by a writer of many files into one folder, which cleans the folder once)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if clean:
        remove_stale_temporaries(path.parent, path.name)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_HOST}@{os.getpid()}.", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; give it the usual permissions
    try:
        binary = "b" in mode
        if path.name.endswith(".gz"):
            f = gzip.open(tmp, "wb" if binary else "wt", **({} if binary else {"encoding": "utf-8"}))
        else:
            f = open(tmp, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"}))
        with f:
            yield f
            f.flush()
        if fsync:
            with open(tmp, "rb") as g:
                os.fsync(g.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str, fsync: bool = True) -> None:
    with atomic_open(path, "w", fsync=fsync) as f:
        f.write(text)


def atomic_write_json(path: str | os.PathLike, obj: object, indent: Optional[int] = 2) -> None:
    atomic_write_text(path, json.dumps(obj, indent=indent))


@contextmanager
def staged_cache_folder(folder: str | os.PathLike, settings: dict) -> Iterator[Path]:
    """Build a cache entry (an encoder a stage trained, say) in a temporary folder beside ``folder``,
    then publish it in one rename, marked by a ``DONE`` file and recorded in ``settings.json``.
    Yields the folder to write into; a temporary work folder is its sibling ``../work``. A reader
    trusts only ``folder/DONE``: an unfinished earlier attempt at ``folder`` is replaced, and one
    published meanwhile by another process is kept (the same key, the same content)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{folder.name}-", dir=folder.parent) as tmp:
        staged = Path(tmp) / "out"
        staged.mkdir()
        (Path(tmp) / "work").mkdir()
        yield staged
        atomic_write_json(staged / "settings.json", settings)
        (staged / "DONE").write_text("", encoding="utf-8")
        if not (folder / "DONE").is_file():
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(staged, folder)


def quiet_on_closed_pipe(main: Any) -> Any:
    """A command's entry point that exits quietly (status 0) when the pipe its output goes to closes
    (``uda-train --help | head -5``) instead of ending in a BrokenPipeError traceback."""
    @functools.wraps(main)
    def entry(*args: Any, **kwargs: Any) -> Any:
        try:
            return main(*args, **kwargs)
        except BrokenPipeError:
            # what is left in the buffer would fail again at exit: let it go nowhere
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    return entry
