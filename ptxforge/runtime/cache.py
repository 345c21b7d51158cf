"""The cubin cache: in-process, and on disk across processes.

What the disk cache promises (docs/runtime.md has the whole list and the tests of each):

* **Only the user's own files are run.**  The default directory is the platform's per-user
  cache directory; it is created with mode 0700.  A cache directory that is not owned by the
  user, or that group or others may write, is not used at all: one warning, then every load
  JIT-compiles.  Its subdirectories must be real directories held the same way (never links),
  and entries are opened without following symbolic links, must be regular files owned by the
  user that group and others cannot write, and are refused above a size cap before a byte is
  read, so a planted link, FIFO or device file can neither hang nor flood a load.
* **An entry is only used for exactly its inputs.**  Its name and its header carry the full
  key: a sha256 of the PTX text, the JIT target, the JIT options, the ptxforge version and the
  driver's version (the CUDA version and the driver build).  The header also holds the magic,
  the format version and a sha256 of everything else, so a truncated, damaged or misnamed
  entry is detected and never handed to the driver.  (The checksum finds damage; it is no
  defence against a writer, which is what the directory checks are for.)
* **Damage is repaired without a race.**  A damaged entry is not deleted: the rebuilt cubin
  is written to a temporary file and renamed over it, so a good entry that a concurrent
  writer has just put there is replaced by another good one, never removed.
* **It stays bounded.**  Past ``PTXFORGE_CACHE_MAX_BYTES`` (default 1 GiB) the least
  recently used entries are removed (every hit refreshes its entry's modification time).

``PTXFORGE_CACHE_DIR`` (or ``set_cache_dir``) moves the cache; ``PTXFORGE_CACHE=0``
(or ``set_disk_cache(False)``) turns the disk cache off.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import struct
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass

_PTXFORGE_INTERNAL = True

CACHE_DIR_ENV = "PTXFORGE_CACHE_DIR"
CACHE_ENV = "PTXFORGE_CACHE"
CACHE_MAX_ENV = "PTXFORGE_CACHE_MAX_BYTES"

#: Bumped when the entry layout or the key recipe changes (old entries then simply miss).
FORMAT = 2
_MAGIC = b"PTXFCUB\x02"
# magic, format, key (64 hex digits), metadata length, payload length, sha256(header before it | meta | payload)
_HEAD = struct.Struct("<8sI64sIQ32s")
_HEAD_UNSIGNED = _HEAD.size - 32

#: The largest entry read back (a cubin of one module is rarely more than a few MB).
MAX_ENTRY_BYTES = 64 << 20
#: The default bound on the whole disk cache.
DEFAULT_MAX_BYTES = 1 << 30
#: Temporary files older than this are leftovers of a killed writer and are pruned.
STALE_TMP_SECONDS = 3600


@dataclass
class CacheStats:
    """Counters since process start (or the last reset)."""

    memory_hits: int = 0
    disk_hits: int = 0
    compiles: int = 0  # cache misses: the driver JIT ran
    corrupt: int = 0  # entries rejected (damaged, misnamed, not a regular file, too large) and rebuilt
    writes: int = 0
    write_errors: int = 0
    pruned: int = 0  # entries removed to keep the cache under its size limit
    unsafe_dirs: int = 0  # loads that skipped the disk cache because its directory is not safe

    def reset(self) -> None:
        """Set every counter back to 0."""
        for k in vars(self):
            setattr(self, k, 0)


stats = CacheStats()

_dir_override: str | None = None
_disk_override: bool | None = None


def cache_key(ptx: str, target: str, options, driver, ptxforge_version: str | None = None) -> str:
    """Hex sha256 naming the cubin that the driver makes from these inputs.

    `driver` is the driver's version as text (``DeviceInfo.driver_id``: CUDA version and build);
    `ptxforge_version` defaults to the running ptxforge's.
    """
    if ptxforge_version is None:
        from .._version import __version__ as ptxforge_version
    h = hashlib.sha256()
    for part in (f"ptxforge-cubin-{FORMAT}", ptx, target, repr(tuple(options)), str(driver), str(ptxforge_version)):
        b = part.encode()
        h.update(struct.pack("<Q", len(b)))
        h.update(b)
    return h.hexdigest()


def user_cache_base() -> str:
    """The platform's per-user cache directory ($XDG_CACHE_HOME or ~/.cache; ~/Library/Caches; %LOCALAPPDATA%)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        if base:
            return base
        return os.path.join(os.path.expanduser("~"), "AppData", "Local")
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~"), "Library", "Caches")
    base = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(base):  # the XDG spec: a relative value is invalid and ignored
        return base
    return os.path.join(os.path.expanduser("~"), ".cache")


def default_cache_dir() -> str:
    """<user cache directory>/ptxforge/cubins."""
    return os.path.join(user_cache_base(), "ptxforge", "cubins")


def cache_dir() -> str:
    """Where cubins are stored: set_cache_dir(), else $PTXFORGE_CACHE_DIR, else default_cache_dir()."""
    return _dir_override or os.environ.get(CACHE_DIR_ENV) or default_cache_dir()


def set_cache_dir(path) -> None:
    """Store cubins under `path` (None: back to the environment / default).  A relative path is taken from the
    current directory now: a later ``os.chdir`` does not move the cache."""
    global _dir_override
    _dir_override = os.path.abspath(os.fspath(path)) if path is not None else None


def disk_cache_enabled() -> bool:
    """Whether loads read and write the disk cache (set_disk_cache(), else $PTXFORGE_CACHE, default on)."""
    if _disk_override is not None:
        return _disk_override
    return os.environ.get(CACHE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def set_disk_cache(enabled: bool | None) -> None:
    """Turn the disk cache on or off for this process (None: back to $PTXFORGE_CACHE)."""
    global _disk_override
    _disk_override = None if enabled is None else bool(enabled)


def max_cache_bytes() -> int:
    """The size bound of the disk cache: $PTXFORGE_CACHE_MAX_BYTES, default 1 GiB."""
    raw = os.environ.get(CACHE_MAX_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{CACHE_MAX_ENV} must be a number of bytes, got {raw!r}") from None
    if n <= 0:
        raise ValueError(f"{CACHE_MAX_ENV} must be positive, got {n}")
    return n


# ---------------------------------------------------------------- entry format

def encode_entry(key: str, payload: bytes, meta: dict | None = None) -> bytes:
    """One cache file: header (magic, format, key, lengths, sha256), JSON metadata, payload."""
    m = json.dumps(meta or {}, sort_keys=True).encode()
    kb = key.encode("ascii")
    if len(kb) != 64:
        raise ValueError(f"a cache key is 64 hex digits, got {len(kb)} characters")
    head = _HEAD.pack(_MAGIC, FORMAT, kb, len(m), len(payload), b"\0" * 32)[:_HEAD_UNSIGNED]
    digest = hashlib.sha256(head + m + payload).digest()
    return head + digest + m + payload


def decode_entry(key: str, data: bytes):
    """(payload, meta) if `data` is an intact entry for exactly `key`, else (None, reason)."""
    if len(data) < _HEAD.size:
        return None, f"truncated header ({len(data)} bytes)"
    magic, fmt, kb, mlen, plen, digest = _HEAD.unpack_from(data)
    if magic != _MAGIC:
        return None, "bad magic"
    if fmt != FORMAT:
        return None, f"format {fmt}, not {FORMAT}"
    if kb != key.encode("ascii", errors="replace"):
        return None, "the entry is for another key"
    if len(data) != _HEAD.size + mlen + plen:
        return None, f"size {len(data)} != {_HEAD.size + mlen + plen} recorded"
    m = data[_HEAD.size:_HEAD.size + mlen]
    payload = data[_HEAD.size + mlen:]
    if hashlib.sha256(data[:_HEAD_UNSIGNED] + m + payload).digest() != digest:
        return None, "checksum mismatch"
    try:
        meta = json.loads(m.decode())
    except ValueError:
        return None, "unreadable metadata"
    if not isinstance(meta, dict):
        return None, "metadata is not a mapping"
    return payload, meta


# ---------------------------------------------------------------- the directory

_HAS_UID = hasattr(os, "geteuid")
_O_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) \
    | getattr(os, "O_BINARY", 0)


def _make_private_dirs(path: str) -> None:
    """Create `path` and any missing parents with mode 0700 (existing ones are left as they are)."""
    missing = []
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass


def directory_problem(path: str, *, follow: bool = True) -> str | None:
    """Why `path` may not hold cubins that this process will run, or None when it may.

    It must be a directory owned by this user that neither group nor others can write.  `follow=False`
    also refuses a symbolic link (the cache's own subdirectories are never links).
    """
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError as e:
        return f"cannot stat it ({e.strerror or e})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    return _owner_problem(st)


def _owner_problem(st) -> str | None:
    """Why a file or directory with stat `st` is not this user's alone to write, or None."""
    if _HAS_UID:
        if st.st_uid != os.geteuid():
            return f"it is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
        if st.st_mode & 0o022:
            return f"group or others may write it (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


_warned_dirs: set = set()
_warn_lock = threading.Lock()


def _warn_once(root: str, why: str) -> None:
    with _warn_lock:
        if root in _warned_dirs:
            return
        _warned_dirs.add(root)
    warnings.warn(f"ptxforge: not using the cubin cache {root}: {why}; loads JIT-compile instead "
                  f"(set {CACHE_DIR_ENV} to a private directory, or {CACHE_ENV}=0)", RuntimeWarning, stacklevel=4)


class DiskCache:
    """Cubin files under one directory: <dir>/<key[:2]>/<key>.cubin."""

    def __init__(self, root: str, max_bytes: int | None = None):
        self.root = root
        self.max_bytes = max_cache_bytes() if max_bytes is None else int(max_bytes)
        self.last_rejection: str | None = None  # why the last get() refused an entry

    def path(self, key: str) -> str:
        """The file of `key`'s entry."""
        return os.path.join(self.root, key[:2], key + ".cubin")

    def prepare(self) -> str | None:
        """Create the directory (mode 0700) if missing; None when it is safe to use, else why not."""
        try:
            _make_private_dirs(self.root)
        except OSError as e:
            return f"cannot create it ({e.strerror or e})"
        return directory_problem(self.root)

    def _read(self, p: str, limit: int):
        """The bytes of the regular file `p` (not followed if a link), or (None, why)."""
        try:
            fd = os.open(p, _O_READ)
        except FileNotFoundError:
            return None, None
        except OSError as e:
            if e.errno == errno.ELOOP:
                return None, "it is a symbolic link"
            return None, f"cannot open it ({e.strerror or e})"
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None, "it is not a regular file"
            owner = _owner_problem(st)
            if owner is not None:
                return None, owner
            if st.st_size > limit:
                return None, f"it has {st.st_size} bytes, over the {limit}-byte limit"
            chunks, left = [], st.st_size + 1  # one more byte tells a file that grew since fstat
            while left > 0:
                b = os.read(fd, min(left, 1 << 20))
                if not b:
                    break
                chunks.append(b)
                left -= len(b)
            data = b"".join(chunks)
            if len(data) > st.st_size:
                return None, "it grew while being read"
            if os.utime in os.supports_fd:
                try:
                    os.utime(fd)  # a hit makes the entry the most recently used
                except OSError:
                    pass
            return data, None
        finally:
            os.close(fd)

    def get(self, key: str):
        """(payload, meta) or None.  A refused entry is counted in stats.corrupt and left in place:
        the next put() replaces it atomically."""
        self.last_rejection = None
        p = self.path(key)
        sub = directory_problem(os.path.dirname(p), follow=False) if os.path.lexists(os.path.dirname(p)) else None
        if sub is not None:  # a link or someone else's directory in place of the cache's own subdirectory
            self.last_rejection = f"its directory {os.path.dirname(p)}: {sub}"
            stats.corrupt += 1
            return None
        data, why = self._read(p, min(MAX_ENTRY_BYTES, self.max_bytes))
        if data is None:
            if why is not None:
                self.last_rejection = why
                stats.corrupt += 1
            return None
        payload, meta = decode_entry(key, data)
        if payload is None:
            self.last_rejection = meta
            stats.corrupt += 1
            return None
        return payload, meta

    def put(self, key: str, payload: bytes, meta: dict | None = None) -> bool:
        """Write the entry to a temporary file and rename it into place; prune past the size limit."""
        p = self.path(key)
        entry = encode_entry(key, payload, meta)
        if len(entry) > min(MAX_ENTRY_BYTES, self.max_bytes):
            return False
        try:
            d = os.path.dirname(p)
            try:
                os.mkdir(d, 0o700)
            except FileExistsError:
                pass
            sub = directory_problem(d, follow=False)
            if sub is not None:  # never write through a link, nor into a directory others may change
                raise OSError(errno.EPERM, f"{d}: {sub}")
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)  # mode 0600
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(entry)
                os.replace(tmp, p)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as e:
            stats.write_errors += 1
            if stats.write_errors == 1:
                warnings.warn(f"ptxforge: cannot write the cubin cache under {self.root} ({e}); "
                              f"set {CACHE_DIR_ENV} or {CACHE_ENV}=0", RuntimeWarning, stacklevel=3)
            return False
        stats.writes += 1
        self.prune()
        return True

    def _files(self):
        """(mtime, size, path, is_tmp) of every entry and leftover temporary file."""
        out = []
        try:
            subs = os.listdir(self.root)
        except OSError:
            return out
        for sub in subs:
            d = os.path.join(self.root, sub)
            try:
                if not stat.S_ISDIR(os.lstat(d).st_mode):
                    continue
                names = os.listdir(d)
            except OSError:
                continue
            for name in names:
                is_tmp = name.startswith(".tmp-")
                if not (is_tmp or name.endswith(".cubin")):
                    continue
                path = os.path.join(d, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                out.append((st.st_mtime, st.st_size if stat.S_ISREG(st.st_mode) else 0, path, is_tmp))
        return out

    def total_bytes(self) -> int:
        """Bytes held by entries now."""
        return sum(size for _, size, _, tmp in self._files() if not tmp)

    def prune(self, max_bytes: int | None = None) -> int:
        """Remove least recently used entries until at most 3/4 of `max_bytes` remain (only when over it),
        and temporary files left by killed writers; returns how many entries were removed."""
        limit = self.max_bytes if max_bytes is None else int(max_bytes)
        files = self._files()
        now = time.time()
        for mtime, _, path, is_tmp in files:
            if is_tmp and now - mtime > STALE_TMP_SECONDS:
                _unlink(path)
        entries = sorted((f for f in files if not f[3]), key=lambda f: f[0])
        total = sum(f[1] for f in entries)
        if total <= limit:
            return 0
        n = 0
        for _, size, path, _ in entries:
            if total <= limit * 3 // 4:
                break
            if _unlink(path):
                total -= size
                n += 1
        stats.pruned += n
        return n

    def remove(self, key: str) -> None:
        """Delete `key`'s entry if present."""
        _unlink(self.path(key))

    def clear(self) -> int:
        """Remove every entry; returns how many."""
        n = 0
        for _, _, path, is_tmp in self._files():
            if _unlink(path) and not is_tmp:
                n += 1
        return n


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def disk_cache() -> DiskCache | None:
    """The disk cache in effect now, or None when it is off or its directory is not safe (warned once)."""
    if not disk_cache_enabled():
        return None
    dc = DiskCache(cache_dir())
    why = dc.prepare()
    if why is not None:
        stats.unsafe_dirs += 1
        _warn_once(dc.root, why)
        return None
    return dc


# ---------------------------------------------------------------- in-process

_memory: dict = {}
_memory_lock = threading.Lock()
_key_locks: dict = {}


def memory_get(key):
    """The LoadedModule cached in this process under `key`, or None."""
    return _memory.get(key)


def memory_put(key, value) -> None:
    """Remember a LoadedModule for this process."""
    with _memory_lock:
        _memory[key] = value


def memory_drop(key, value=None) -> None:
    """Forget `key` (only if it still maps to `value`, when given)."""
    with _memory_lock:
        if value is None or _memory.get(key) is value:
            _memory.pop(key, None)


def key_lock(key) -> threading.Lock:
    """One lock per module key: concurrent first loads of one module JIT-compile it once."""
    with _memory_lock:
        lock = _key_locks.get(key)
        if lock is None:
            lock = _key_locks[key] = threading.Lock()
        return lock


def clear_memory_cache() -> None:
    """Forget loaded modules (the next load reads the disk cache or JIT-compiles again), and the per-key locks
    no load holds now.  A forgotten module is unloaded once nothing refers to it any more (its kernels, their
    bound launches and plans keep it), so modules in use keep running."""
    with _memory_lock:
        _memory.clear()
        for key in [k for k, lock in _key_locks.items() if not lock.locked()]:
            del _key_locks[key]


def clear_cache(disk: bool = True) -> int:
    """Empty the in-process cache and (by default) the disk cache; returns disk entries removed."""
    clear_memory_cache()
    if not disk:
        return 0
    root = cache_dir()
    if directory_problem(root) is not None:
        return 0  # not ours to empty
    return DiskCache(root).clear()
