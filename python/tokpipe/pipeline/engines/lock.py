"""The lock on an output folder: one run writes to a folder at a time.

Two runs on one output folder would redo and publish each other's work units and cut each
other's shards. So a run holds ``OUT/.tokpipe/lock.json`` from before it touches the folder
until it ends; a second run is refused at once, with one line naming the holder (pid, host,
start time).

A run killed with ``kill -9``, by the OOM killer or by a power cut leaves its lock behind,
which must not block the resume. A lock is **stale**, and taken over, when

* its holder ran where this process can see it (the same host, boot and pid namespace) and
  that process is gone (no process with its pid and start time), or
* its holder ran elsewhere (a shared filesystem, a Ray driver) and its heartbeat is older
  than :data:`STALE_AFTER`: the holder rewrites it every :data:`HEARTBEAT` seconds while it
  runs. (Clocks of the machines that share a folder must agree to within that.) A run that
  finds its lock taken over stops (:meth:`RunLock.check`) rather than write beside the
  new holder.

The protocol needs only two atomic operations, which object stores also offer: *create if
absent* (``O_EXCL`` here; a conditional put, ``If-None-Match: *``, on S3 and GCS) to take a
free lock, and *rename* of the stale lock to a name of the taker's own (a delete conditional
on the object's version, on object stores) to take over a stale one: of two runs that find
the same stale lock, one renames it and the other finds it gone and starts over (or, if it
moved a lock that was no longer the stale one, puts it back).

In object storage (an output in a bucket) the lock is an object: taken by a conditional put
(``If-None-Match: *``), rewritten by a plain put, and a stale one is taken over by reading and
deleting it (there is no rename): of two runs taking over the same stale lock at the same
instant, the one whose lock is deleted by the other finds, at its next heartbeat, that the
lock is no longer its own and stops (:meth:`RunLock.check`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tokpipe import storage
from tokpipe.errors import PipelineError
from tokpipe.pipeline import fs
from tokpipe.storage import Location, RemotePath

__all__ = ["RunLock", "LockHeld", "HEARTBEAT", "STALE_AFTER"]

#: Seconds between two heartbeats of a live holder.
HEARTBEAT = 30.0
#: A lock whose heartbeat is older than this (seconds) is stale, wherever its holder ran.
STALE_AFTER = 600.0


class LockHeld(PipelineError):
    """The output folder is in use by another run."""


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _place() -> str:
    """Where pids mean the same thing as here: host, boot and pid namespace."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{socket.gethostname()}/{_read(Path('/proc/sys/kernel/random/boot_id'))}/{namespace}"


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), "" elsewhere: a pid reused
    by a later process has another."""
    stat = _read(Path(f"/proc/{pid}/stat"))
    # The command name (field 2) may hold spaces and parentheses: fields count from its end.
    return stat.rsplit(")", 1)[-1].split()[19] if ")" in stat else ""


def _read_json(path: Location) -> dict[str, Any]:
    try:
        data = json.loads(fs.read_text(path))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _create_remote(path: RemotePath, text: str) -> None:
    """Puts ``text`` at ``path`` only if no object is there (``FileExistsError`` else)."""
    with storage.calling(path) as (filesystem, key), filesystem.open(key, "xb") as f:
        f.write(text.encode("utf-8"))


def _alive(pid: int, start: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a process of another user: alive
    return not start or _start_time(pid) in ("", start)


class RunLock:
    """The lock file of one output folder (see the module docstring). :meth:`acquire` takes
    it or raises :class:`LockHeld`; :meth:`release` gives it back. While held, a daemon
    thread keeps its heartbeat fresh."""

    def __init__(self, path: Location, what: str) -> None:
        self.path = path
        self.what = what  # the folder, as messages name it
        self.token = uuid.uuid4().hex
        self._stop = threading.Event()
        self._beating: threading.Thread | None = None
        self._started = time.time()
        self.lost = False

    def _record(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "host": socket.gethostname(), "place": _place(),
                "process_start": _start_time(os.getpid()), "token": self.token,
                "started": self._started, "heartbeat": time.time()}

    def acquire(self) -> None:
        if isinstance(self.path, RemotePath):
            self._acquire_remote(self.path)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(8):  # each pass either takes the lock or finds who holds it now
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is None:
                    continue  # released or taken over meanwhile: try again
                if not self._stale(holder):
                    raise LockHeld(self._held_message(holder)) from None
                # Stale: move it aside under a name of our own; only one taker succeeds. What
                # was moved must be the lock judged stale: another taker may have replaced it
                # in between with a live one of its own, which goes back.
                aside = self.path.with_name(f".{self.path.name}.stale-{self.token}")
                try:
                    os.rename(self.path, aside)
                except FileNotFoundError:
                    continue
                moved = _read_json(aside)
                if moved.get("token") != holder.get("token") or moved.get("heartbeat") != holder.get("heartbeat"):
                    try:
                        os.link(aside, self.path)  # back, unless a third run took the name
                    except FileExistsError:
                        pass
                aside.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(self._record()))
            self._start_beating()
            return
        raise LockHeld(f"{self.what}: could not take the run lock {self.path} (other runs keep taking it)")

    def _acquire_remote(self, path: RemotePath) -> None:
        for _ in range(8):
            try:
                _create_remote(path, json.dumps(self._record()))
            except FileExistsError:
                holder = self._holder()
                if holder is None:
                    continue
                if not self._stale(holder):
                    raise LockHeld(self._held_message(holder)) from None
                if _read_json(path).get("token") == holder.get("token"):
                    fs.remove(path)  # no rename in a bucket: see the module docstring
                continue
            self._start_beating()
            return
        raise LockHeld(f"{self.what}: could not take the run lock {path} (other runs keep taking it)")

    def _start_beating(self) -> None:
        self._beating = threading.Thread(target=self._beat, name="tokpipe-lock", daemon=True)
        self._beating.start()

    def _holder(self) -> dict[str, Any] | None:
        try:
            data = json.loads(fs.read_text(self.path))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            if isinstance(self.path, RemotePath):
                return {"heartbeat": 0, "place": ""}  # an object is put whole: unreadable is broken
            # Cut short (the holder died while writing it): its last write is its heartbeat.
            try:
                return {"heartbeat": self.path.stat().st_mtime, "place": ""}
            except FileNotFoundError:
                return None
        return data if isinstance(data, dict) else {"heartbeat": 0, "place": ""}

    @staticmethod
    def _stale(holder: dict[str, Any]) -> bool:
        pid = holder.get("pid")
        if holder.get("place") == _place() and isinstance(pid, int):
            # Here the process itself answers, however long it was silent (a run stopped
            # with Ctrl-Z, a suspended machine).
            return pid != os.getpid() and not _alive(pid, str(holder.get("process_start", "")))
        heartbeat = holder.get("heartbeat")
        return not isinstance(heartbeat, (int, float)) or time.time() - heartbeat > STALE_AFTER

    def _held_message(self, holder: dict[str, Any]) -> str:
        started = holder.get("started")
        since = datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds") \
            if isinstance(started, (int, float)) else "an unknown time"
        return (f"{self.what} is in use by another tokpipe run (pid {holder.get('pid', '?')} on host "
                f"{holder.get('host', '?')}, since {since}); wait for it to end or stop it (a killed run's lock "
                f"is taken over once its process is gone, or after {STALE_AFTER / 60:.0f} minutes without a heartbeat)")

    def check(self) -> None:
        """Raises :class:`LockHeld` if another run took this run's lock (it judged this run
        stale: silent for ``STALE_AFTER`` on another machine). The run must stop: two runs
        would write one folder."""
        if self.lost:
            raise LockHeld(f"{self.what}: another tokpipe run took over this run's lock (this run was silent for "
                           f"over {STALE_AFTER / 60:.0f} minutes); stopping, so that one run writes the folder")

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            if not self._beat_once():
                return

    def _beat_once(self) -> bool:
        """Refreshes the heartbeat; False (and :attr:`lost`) when the lock is no longer ours."""
        holder = _read_json(self.path)
        if holder.get("token") != self.token:
            self.lost = True  # never clobber the new holder's lock
            return False
        try:
            if isinstance(self.path, RemotePath):
                fs.write_text(self.path, json.dumps(self._record()))
            else:
                tmp = self.path.with_name(f".{self.path.name}.{self.token}.tmp")
                tmp.write_text(json.dumps(self._record()), encoding="utf-8")
                os.replace(tmp, self.path)
        except OSError:
            pass  # a missed beat costs nothing until STALE_AFTER; the run goes on
        return True

    def release(self) -> None:
        """Gives the lock back (only if this run still holds it)."""
        self._stop.set()
        if self._beating is not None:
            self._beating.join()
            self._beating = None
        holder = self._holder()
        if holder is not None and holder.get("token") == self.token:
            fs.remove(self.path)
