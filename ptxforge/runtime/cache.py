"""The cubin cache: in-process, and on disk across processes.

Entries are keyed by a sha256 of everything that decides the driver's output: the PTX
text, the JIT target, the JIT options and the driver version.  Each file carries a
checksum of its key, metadata and payload, so a truncated or corrupted entry is
detected, removed and rebuilt, never handed to the driver.  Files are written to a
temporary name and renamed, so readers never see half an entry.

``PTXFORGE_CACHE_DIR`` (or ``set_cache_dir``) moves the cache; ``PTXFORGE_CACHE=0``
(or ``set_disk_cache(False)``) turns the disk cache off.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import threading
import warnings
from dataclasses import dataclass

_PTXFORGE_INTERNAL = True

CACHE_DIR_ENV = "PTXFORGE_CACHE_DIR"
CACHE_ENV = "PTXFORGE_CACHE"

#: Bumped when the entry layout or the key recipe changes (old entries then simply miss).
FORMAT = 1
_MAGIC = b"PTXFCUB\x01"
_HEAD = struct.Struct("<8sIQ32s")  # magic, metadata length, payload length, sha256(key | meta | payload)


@dataclass
class CacheStats:
    """Counters since process start (or the last reset)."""

    memory_hits: int = 0
    disk_hits: int = 0
    compiles: int = 0  # cache misses: the driver JIT ran
    corrupt: int = 0  # entries rejected by the integrity check and rebuilt
    writes: int = 0
    write_errors: int = 0

    def reset(self) -> None:
        """Set every counter back to 0."""
        for k in vars(self):
            setattr(self, k, 0)


stats = CacheStats()

_dir_override: str | None = None
_disk_override: bool | None = None


def cache_key(ptx: str, target: str, options, driver_version: int) -> str:
    """Hex sha256 naming the cubin that the driver makes from these inputs."""
    h = hashlib.sha256()
    for part in (f"ptxforge-cubin-{FORMAT}", ptx, target, repr(tuple(options)), str(int(driver_version))):
        b = part.encode()
        h.update(struct.pack("<Q", len(b)))
        h.update(b)
    return h.hexdigest()


def default_cache_dir() -> str:
    """$XDG_CACHE_HOME (else ~/.cache)/ptxforge/cubins."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ptxforge", "cubins")


def cache_dir() -> str:
    """Where cubins are stored: set_cache_dir(), else $PTXFORGE_CACHE_DIR, else ~/.cache/ptxforge/cubins."""
    return _dir_override or os.environ.get(CACHE_DIR_ENV) or default_cache_dir()


def set_cache_dir(path) -> None:
    """Store cubins under `path` (None: back to the environment / default)."""
    global _dir_override
    _dir_override = os.fspath(path) if path is not None else None


def disk_cache_enabled() -> bool:
    """Whether loads read and write the disk cache (set_disk_cache(), else $PTXFORGE_CACHE, default on)."""
    if _disk_override is not None:
        return _disk_override
    return os.environ.get(CACHE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def set_disk_cache(enabled: bool | None) -> None:
    """Turn the disk cache on or off for this process (None: back to $PTXFORGE_CACHE)."""
    global _disk_override
    _disk_override = None if enabled is None else bool(enabled)


# ---------------------------------------------------------------- entry format

def encode_entry(key: str, payload: bytes, meta: dict | None = None) -> bytes:
    """One cache file: header (magic, metadata and payload lengths, sha256 of key, metadata and payload), JSON
    metadata, payload.
    """
    m = json.dumps(meta or {}, sort_keys=True).encode()
    digest = hashlib.sha256(key.encode() + m + payload).digest()
    return _HEAD.pack(_MAGIC, len(m), len(payload), digest) + m + payload


def decode_entry(key: str, data: bytes):
    """(payload, meta) if `data` is an intact entry for `key`, else (None, reason)."""
    if len(data) < _HEAD.size:
        return None, f"truncated header ({len(data)} bytes)"
    magic, mlen, plen, digest = _HEAD.unpack_from(data)
    if magic != _MAGIC:
        return None, "bad magic"
    if len(data) != _HEAD.size + mlen + plen:
        return None, f"size {len(data)} != {_HEAD.size + mlen + plen} recorded"
    m = data[_HEAD.size:_HEAD.size + mlen]
    payload = data[_HEAD.size + mlen:]
    if hashlib.sha256(key.encode() + m + payload).digest() != digest:
        return None, "checksum mismatch"
    try:
        meta = json.loads(m.decode())
    except ValueError:
        return None, "unreadable metadata"
    return payload, meta


class DiskCache:
    """Cubin files under one directory: <dir>/<key[:2]>/<key>.cubin."""

    def __init__(self, root: str):
        self.root = root

    def path(self, key: str) -> str:
        """The file of `key`'s entry."""
        return os.path.join(self.root, key[:2], key + ".cubin")

    def get(self, key: str):
        """(payload, meta) or None; a damaged entry is removed and counted in stats.corrupt."""
        p = self.path(key)
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError:
            return None
        payload, meta = decode_entry(key, data)
        if payload is None:
            stats.corrupt += 1
            self.remove(key)
            return None
        return payload, meta

    def put(self, key: str, payload: bytes, meta: dict | None = None) -> bool:
        """Write the entry to a temporary file and rename it into place; False (with one warning per process)
        when the cache directory cannot be written.
        """
        p = self.path(key)
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(p))
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(encode_entry(key, payload, meta))
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
        return True

    def remove(self, key: str) -> None:
        """Delete `key`'s entry if present."""
        try:
            os.unlink(self.path(key))
        except OSError:
            pass

    def clear(self) -> int:
        """Remove every entry; returns how many."""
        n = 0
        if not os.path.isdir(self.root):
            return 0
        for sub in os.listdir(self.root):
            d = os.path.join(self.root, sub)
            if not os.path.isdir(d):
                continue
            for name in os.listdir(d):
                if name.endswith(".cubin") or name.startswith(".tmp-"):
                    try:
                        os.unlink(os.path.join(d, name))
                        n += 1
                    except OSError:
                        pass
        return n


def disk_cache() -> DiskCache | None:
    """The disk cache in effect now, or None when it is off."""
    return DiskCache(cache_dir()) if disk_cache_enabled() else None


# ---------------------------------------------------------------- in-process

_memory: dict = {}
_memory_lock = threading.Lock()


def memory_get(key):
    """The LoadedModule cached in this process under `key`, or None."""
    return _memory.get(key)


def memory_put(key, value) -> None:
    """Remember a LoadedModule for this process."""
    with _memory_lock:
        _memory[key] = value


def clear_memory_cache() -> None:
    """Forget loaded modules (the next load reads the disk cache or JIT-compiles again)."""
    with _memory_lock:
        _memory.clear()


def clear_cache(disk: bool = True) -> int:
    """Empty the in-process cache and (by default) the disk cache; returns disk entries removed."""
    clear_memory_cache()
    return DiskCache(cache_dir()).clear() if disk else 0
