"""A real S3 protocol server for the tests: moto's standalone server (``ThreadedMotoServer``,
as s3fs's own tests use it) on 127.0.0.1, on a free port, inside the test process.

It speaks HTTP like any S3 endpoint, so everything tokpipe does against it goes through the
same fsspec/s3fs/botocore calls as against AWS; a command run in a subprocess reaches it
through ``AWS_ENDPOINT_URL`` like any S3-compatible endpoint. Its buckets live in memory and
vanish when it stops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["start_s3", "bucket_filesystem"]


def start_s3() -> tuple[str, Callable[[], None]]:
    """Starts the server; returns (its endpoint URL, a function that stops it)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return f"http://{host}:{port}", server.stop


def bucket_filesystem() -> Any:
    """An s3fs filesystem on the server the environment names (``AWS_ENDPOINT_URL``, set by
    the ``s3_endpoint`` fixture), for a test to put and read objects itself; not the one
    tokpipe caches."""
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
