"""Where data lives: local paths and object-storage URLs behind one small API.

Every place tokpipe takes a path (inputs, ``-o``, ``--config``, ``-t``, a stage's model file,
a trainer's corpus) takes a URL too: ``s3://``, ``gs://``/``gcs://``, ``az://``/``abfs://``/
``abfss://``, ``hf://`` and ``file://``. :func:`location` turns either into a
:class:`~pathlib.Path` (local) or a :class:`RemotePath` (anything else).

The one filesystem layer is fsspec: it is the only one of the three candidates (pyarrow.fs,
fsspec, obstore) that reaches all five schemes (``hf://`` exists only as huggingface_hub's
fsspec filesystem), and ``benches/RESULTS.md`` shows its reads, with the block settings used
here, keep up with the others once the reader works between reads, as the stages do. Each cloud's fsspec package is an optional extra
(``tokpipe[s3]``, ``[gcs]``, ``[azure]``, ``[hf]``); without it the error names the extra.

Credentials come from each cloud's own chain (environment, config files, instance roles): we
pass nothing unless told. :func:`configure` takes extra options (``endpoint_url=...``, as
``--storage-option`` gives them); they travel to worker processes through the environment
(:data:`OPTIONS_VARIABLE`) and are never written to a log, a manifest, an error or the stats.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Union

from tokpipe.errors import ArgumentTypeError, InvalidArgumentError, StorageError, TokpipeError

__all__ = ["RemotePath", "Location", "location", "is_remote", "is_url", "configure", "storage_options", "filesystem",
           "calling", "is_pattern", "objects", "open_input", "open_size", "version", "local_copy", "cache_dir",
           "upload", "storage_error", "redact", "naming_urls", "local_file", "OPTIONS_VARIABLE", "SCHEMES"]

#: URL scheme -> (fsspec protocol, the module that implements it, tokpipe's extra).
SCHEMES: dict[str, tuple[str, str, str]] = {
    "s3": ("s3", "s3fs", "s3"),
    "gs": ("gs", "gcsfs", "gcs"),
    "gcs": ("gs", "gcsfs", "gcs"),
    "az": ("az", "adlfs", "azure"),
    "abfs": ("abfs", "adlfs", "azure"),
    "abfss": ("abfss", "adlfs", "azure"),
    "hf": ("hf", "huggingface_hub", "hf"),
}
#: The environment variable that carries :func:`configure`'s options to worker processes.
OPTIONS_VARIABLE = "TOKPIPE_STORAGE_OPTIONS"
#: Block of an input opened remotely, fetched in the background while the reader works on the
#: one before (two blocks kept): with 30 ms a request and the stages' work between reads, this
#: read at 0.91 of local disk's speed where an 8 MiB read-ahead reached 0.63 (benches/RESULTS.md,
#: "Object storage: the filesystem layer").
READ_BLOCK = 16 << 20
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)


class RemotePath:
    """An object in a bucket (or a prefix), as ``scheme://bucket/key``: the parts of
    :class:`~pathlib.PurePosixPath` the pipeline uses (``/``, ``name``, ``parent``,
    ``suffix``, ``with_name``...), without collapsing the ``//`` that ``Path`` would.

    It has no ``__fspath__``: passing one to ``open`` or ``os.stat`` fails loudly instead of
    making a local folder named ``s3:``."""

    __slots__ = ("scheme", "key")

    def __init__(self, url: str) -> None:
        match = _URL.match(url)
        if match is None or match.group(1).lower() not in SCHEMES:
            raise InvalidArgumentError(f"not an object-storage URL: {redact(url)!r} (known schemes: "
                                       f"{', '.join(s + '://' for s in SCHEMES)})")
        self.scheme = match.group(1).lower()
        if "@" in match.group(2).split("/", 1)[0]:
            # s3://KEY:SECRET@bucket would carry a credential into every message and manifest.
            raise InvalidArgumentError(f"{redact(url)!r}: credentials in a URL are not taken; set them as the "
                                       "cloud's tools expect (environment, config file, instance role)")
        key = "/".join(part for part in match.group(2).split("/") if part not in ("", "."))
        if not key:
            raise InvalidArgumentError(f"{redact(url)!r} names no bucket")
        self.key = key

    @classmethod
    def _of(cls, scheme: str, key: str) -> RemotePath:
        made = cls.__new__(cls)
        made.scheme, made.key = scheme, key
        return made

    def __str__(self) -> str:
        return f"{self.scheme}://{self.key}"

    def __repr__(self) -> str:
        return f"RemotePath({redact(str(self))!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemotePath) and (self.scheme, self.key) == (other.scheme, other.key)

    def __lt__(self, other: RemotePath) -> bool:
        return (self.scheme, self.key) < (other.scheme, other.key)

    def __hash__(self) -> int:
        return hash((self.scheme, self.key))

    def __truediv__(self, name: Union[str, os.PathLike[str]]) -> RemotePath:
        parts = [p for p in os.fspath(name).split("/") if p not in ("", ".")]
        return RemotePath._of(self.scheme, "/".join([self.key, *parts]))

    @property
    def bucket(self) -> str:
        return self.key.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1] if "/" in self.key else ""

    @property
    def parent(self) -> RemotePath:
        return RemotePath._of(self.scheme, self.key.rsplit("/", 1)[0]) if "/" in self.key else self

    @property
    def suffix(self) -> str:
        name = self.name
        dot = name.rfind(".")
        return name[dot:] if 0 < dot < len(name) - 1 else ""

    @property
    def suffixes(self) -> list[str]:
        name = self.name.lstrip(".")
        return ["." + s for s in name.split(".")[1:]] if "." in name else []

    @property
    def stem(self) -> str:
        suffix = self.suffix
        return self.name[: -len(suffix)] if suffix else self.name

    def with_name(self, name: str) -> RemotePath:
        return self.parent / name

    def with_suffix(self, suffix: str) -> RemotePath:
        return self.with_name(self.stem + suffix)

    def relative_to(self, other: RemotePath) -> str:
        if self.scheme != other.scheme or not (self.key + "/").startswith(other.key + "/"):
            raise InvalidArgumentError(f"{self} is not under {other}")
        return self.key[len(other.key) + 1:]


#: A local path or an object-storage URL.
Location = Union[Path, RemotePath]


def is_url(value: object) -> bool:
    """Whether ``value`` is a string of the form ``scheme://...``."""
    return isinstance(value, str) and _URL.match(value) is not None


def location(value: Union[str, os.PathLike[str], RemotePath]) -> Location:
    """``value`` as a :class:`RemotePath` (an object-storage URL) or a local :class:`Path`
    (a plain path, or a ``file://`` URL). An unknown scheme (``ftp://``) is refused."""
    if isinstance(value, (Path, RemotePath)):
        return value
    if not isinstance(value, (str, os.PathLike)):
        raise ArgumentTypeError(f"expected a path or a URL, got {type(value).__name__}")
    text = os.fspath(value)
    match = _URL.match(text)
    if match is None:
        return Path(text)
    scheme = match.group(1).lower()
    if scheme == "file":
        return Path(match.group(2) or "/")
    return RemotePath(text)


def is_remote(value: object) -> bool:
    """Whether ``value`` (a path, a URL or a location) lives in object storage."""
    return isinstance(value, RemotePath) or (is_url(value) and not str(value).lower().startswith("file://"))


# -- Options and filesystems.

def configure(options: dict[str, Any]) -> None:
    """Extra options for every object-storage filesystem this process and its workers open
    (``endpoint_url``, ``anon``, ``requester_pays``..., as fsspec's filesystems name them);
    replaces the ones given before. Values given as text that read as JSON (``true``, ``3``)
    are taken as such."""
    parsed = {str(k): _value(v) for k, v in options.items()}
    if parsed:
        os.environ[OPTIONS_VARIABLE] = json.dumps(parsed, sort_keys=True)
    else:
        os.environ.pop(OPTIONS_VARIABLE, None)
    _FILESYSTEMS.clear()


def storage_options() -> dict[str, Any]:
    """The options :func:`configure` set (in this process or the one that started it)."""
    text = os.environ.get(OPTIONS_VARIABLE)
    if not text:
        return {}
    try:
        options = json.loads(text)
    except ValueError:
        raise InvalidArgumentError(f"{OPTIONS_VARIABLE} is not a JSON object") from None
    if not isinstance(options, dict):
        raise InvalidArgumentError(f"{OPTIONS_VARIABLE} is not a JSON object")
    return options


def _value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


_FILESYSTEMS: dict[tuple[str, str], Any] = {}


def filesystem(scheme: str) -> Any:
    """The fsspec filesystem of ``scheme`` (one per process and set of options)."""
    protocol, module, extra = SCHEMES[scheme]
    options = storage_options()
    key = (protocol, json.dumps(options, sort_keys=True))
    found = _FILESYSTEMS.get(key)
    if found is not None:
        return found
    try:
        importlib.import_module(module)
        fsspec = importlib.import_module("fsspec")
    except ImportError:
        raise StorageError(f"{scheme}:// needs {module}: pip install 'tokpipe[{extra}]'") from None
    if protocol == "s3":
        options = _s3_options(options)
    # Workers write objects the driver then lists: a listing cached in this process would
    # miss them.
    options.setdefault("use_listings_cache", False)
    try:
        made = fsspec.filesystem(protocol, **options)
    except TypeError as error:  # an option the filesystem does not take
        raise InvalidArgumentError(f"storage option not understood by {scheme}://: {redact(str(error))}") from None
    _FILESYSTEMS[key] = made
    return made


def _s3_options(options: dict[str, Any]) -> dict[str, Any]:
    """s3fs's options: ``endpoint_url`` and ``region_name`` go to botocore's client. (s3fs
    reads ``AWS_ENDPOINT_URL`` itself, through botocore.)"""
    options = dict(options)
    client = dict(options.pop("client_kwargs", {}) or {})
    for name in ("endpoint_url", "region_name"):
        if name in options:
            client[name] = options.pop(name)
    if client:
        options["client_kwargs"] = client
    return options


@contextmanager
def calling(path: RemotePath) -> Iterator[tuple[Any, str]]:
    """The filesystem and key of ``path``, for calls on it: a failure in the block leaves it
    as the one-line error :func:`storage_error` makes of it (a missing object or bucket as
    ``FileNotFoundError`` naming the URL, as a local error names its path)."""
    fs = filesystem(path.scheme)
    try:
        yield fs, path.key
    except Exception as error:
        raise storage_error(error, path) from None


def _version_token(info: dict[str, Any]) -> str:
    """What changes when an object is rewritten, from its listing: its ETag (or hash, or
    modification time, where the store gives no ETag)."""
    token = info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("LastModified") or info.get("mtime")
    return str(token or "")


# -- Reading.

def open_input(path: Union[str, os.PathLike[str], RemotePath], block_size: int = READ_BLOCK) -> IO[bytes]:
    """A seekable binary file over ``path``: ``open`` for a local one, an fsspec file that
    fetches ``block_size`` blocks ahead in the background for a remote one (``FileNotFoundError`` when it is missing;
    other failures as :func:`storage_error` words them)."""
    where = location(path)
    if isinstance(where, Path):
        return open(where, "rb", buffering=1 << 20)
    with calling(where) as (fs, key):
        raw = fs.open(key, "rb", block_size=block_size, cache_type="background", cache_options={"maxblocks": 2})
    # A buffered reader in front: fsspec files lack readline(limit), which the line readers
    # use, and small reads then cost no call into fsspec.
    return io.BufferedReader(raw, buffer_size=1 << 20)  # type: ignore[arg-type]


def version(path: Union[str, os.PathLike[str], RemotePath]) -> tuple[int, Union[int, str]]:
    """``path``'s size and a token that changes when it is rewritten: the modification time
    in nanoseconds of a local file, the ETag (or modification time) of an object
    (``OSError`` when it cannot be read)."""
    where = location(path)
    if isinstance(where, Path):
        info = os.stat(where)
        return info.st_size, info.st_mtime_ns
    with calling(where) as (fs, key):
        info = fs.info(key)
    return int(info.get("size") or 0), _version_token(info)


def is_pattern(text: str) -> bool:
    """Whether ``text`` (a path or a URL) is a glob pattern: it holds ``*``, ``?`` or ``[``."""
    return not {"*", "?", "["}.isdisjoint(text)


def objects(where: RemotePath, keep: Callable[[str], bool]) -> dict[str, dict[str, Any]]:
    """The objects a URL names, by key (sorted), with their listing details (``size``...):
    the object itself, whatever its name; every object under a prefix that ``keep`` takes and
    whose path below the prefix has no hidden (dot) name, as a local folder is walked; or a
    glob's matches, a prefix among them walked the same way and an object kept if ``keep``
    takes it. ``FileNotFoundError`` when nothing is there (for a glob: it matches nothing)."""
    with calling(where) as (fs, key):
        if is_pattern(key):
            matches = fs.glob(key, detail=True)
            if not matches:
                raise FileNotFoundError(2, "the pattern matches nothing", key)
            found: dict[str, dict[str, Any]] = {}
            for match, info in matches.items():
                if info.get("type") == "directory":
                    found.update(_under(fs, match, keep))
                elif keep(match):
                    found[match] = info
        else:
            info = fs.info(key)
            found = _under(fs, key, keep) if info.get("type") == "directory" else {key: info}
    return dict(sorted(found.items()))


def _under(fs: Any, prefix: str, keep: Callable[[str], bool]) -> dict[str, dict[str, Any]]:
    prefix = prefix.rstrip("/")
    found = {}
    for key, info in fs.find(prefix, detail=True).items():
        below = key[len(prefix) + 1:] if key.startswith(prefix + "/") else key.rsplit("/", 1)[-1]
        if not any(part.startswith(".") for part in below.split("/")) and keep(key):
            found[key] = info
    return found


def open_size(f: IO[bytes]) -> int:
    """The size in bytes of a file :func:`open_input` opened."""
    size = getattr(getattr(f, "raw", f), "size", None)  # an fsspec file knows it from its listing
    if isinstance(size, int):
        return size
    return os.fstat(f.fileno()).st_size


def cache_dir() -> Path:
    """Where remote files read by path (tokenizers, models, training corpora) are kept:
    ``$TOKPIPE_CACHE`` or ``~/.cache/tokpipe``."""
    base = os.environ.get("TOKPIPE_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                          os.path.expanduser("~/.cache"), "tokpipe")
    return Path(base)


def local_copy(path: Union[str, os.PathLike[str], RemotePath]) -> Path:
    """A local file with ``path``'s bytes, for readers that need a path (the Rust core's
    loaders, a fastText or KenLM model). A local path is returned as it is; a remote object is
    downloaded once into :func:`cache_dir` under its URL and version (ETag, size), so a
    changed object is fetched again and an unchanged one is not."""
    where = location(path)
    if isinstance(where, Path):
        return where
    with calling(where) as (fs, key):
        info = fs.info(key)
    if info.get("type") == "directory":
        raise StorageError(f"{redact(str(where))} is a folder, not a file")
    digest = hashlib.sha256(f"{where}\0{_version_token(info)}:{info.get('size')}".encode()).hexdigest()[:24]
    target = cache_dir() / "objects" / digest / where.name
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with calling(where) as (fs, key):
            fs.get_file(key, str(tmp))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)
    return target


# -- Writing.

def upload(local: Path, path: RemotePath) -> None:
    """Puts the local file ``local`` at ``path``. One PUT (or a multipart upload, completed in
    one call) makes the object appear whole or not at all: the stand-in for a rename."""
    with calling(path) as (fs, key):
        fs.put_file(str(local), key)


# -- Errors.

_SECRET = re.compile(r"(?i)((?:secret|token|key|password|credential|signature|sig)[^=:\s]*[=:]\s*)[^\s&,'\"]+")
_USERINFO = re.compile(r"(://)[^/@\s]+@")


def redact(text: str) -> str:
    """``text`` with anything that looks like a credential replaced by ``***``: user info in
    a URL, and ``key=value`` pairs whose name says secret, token, key or password."""
    return _SECRET.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


def storage_error(error: BaseException, where: Location) -> Exception:
    """A one-line error for a failed object-storage call on ``where``: a missing object or
    bucket as ``FileNotFoundError``, refused access as ``PermissionError``, missing
    credentials and the rest as :class:`StorageError`; never a credential in the text. A
    tokpipe error raised inside a :func:`calling` block passes as it is."""
    name = redact(str(where))
    if isinstance(error, (TokpipeError, FileExistsError)):
        return error  # tokpipe's own, already worded; or a conditional put refused (the lock)
    kind = type(error).__name__
    text = redact(" ".join(str(error).split()))[:300]
    if kind in ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError",
                "DefaultCredentialsError", "ClientAuthenticationError", "CredentialUnavailableError"):
        return StorageError(f"{name}: no credentials found for {where.scheme if isinstance(where, RemotePath) else 'this'}"
                            ":// (set them as the cloud's tools expect: environment, config file or instance role)")
    if isinstance(error, FileNotFoundError) or "NoSuchBucket" in text or "does not exist" in text:
        return FileNotFoundError(2, "no such object or bucket", name)
    if isinstance(error, PermissionError) or "AccessDenied" in text or "Forbidden" in text:
        return PermissionError(13, "access denied", name)
    return StorageError(f"{name}: {kind}: {text}" if text else f"{name}: {kind}")


@contextmanager
def naming_urls(copies: dict[str, str]) -> Iterator[None]:
    """Errors raised in the block that name a local copy of a remote file (a key of
    ``copies``, local path -> URL, as :func:`local_copy` and the trainers make them) are raised
    again naming the URL instead (redacted): the user gave the URL, the copy's path means
    nothing to them. A ``TokpipeError`` keeps its class; an ``OSError`` its errno."""
    from tokpipe.errors import TokpipeError

    try:
        yield
    except TokpipeError as error:
        text = renamed = str(error)
        for local, url in copies.items():
            renamed = renamed.replace(local, redact(url))
        if renamed == text:
            raise
        raise type(error)(renamed) from None
    except OSError as error:
        if error.filename is None or os.fspath(error.filename) not in copies:
            raise
        raise type(error)(error.errno, error.strerror, redact(copies[os.fspath(error.filename)])) from None


def local_file(path: Union[str, os.PathLike[str], RemotePath]) -> Union[Path, None]:
    """A local file with ``path``'s bytes (:func:`local_copy`), or None when there is no such
    file or object: for a stage's model file, which a stage checks when it is built. Other
    failures (no credentials, a folder) raise as :func:`local_copy` raises them."""
    where = location(path)
    if isinstance(where, Path):
        return where if where.is_file() else None
    try:
        return local_copy(where)
    except FileNotFoundError:
        return None
