"""A background thread that keeps the next few items of an iterator ready (the loader's prefetch: numpy's
copies release the GIL, so gathering the next batches overlaps the consumer's step). An exception raised
while producing is re-raised in the consumer; closing the consumer's iterator stops the thread."""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterator

_END = object()


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


def prefetched(make: Callable[[], Iterator], depth: int) -> Iterator:
    """Iterate ``make()`` in a background thread that keeps up to ``depth`` items ready."""
    if depth <= 0:
        yield from make()
        return
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in make():
                if not put(item):
                    return
            put(_END)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            put(_Failure(exc))

    thread = threading.Thread(target=produce, name="prepflow-loader", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item
    finally:
        stop.set()
        thread.join()
