"""Hot reload: a loader watches its search path for new builds
(plugin_api/hk_watch.h).

A Watch follows the directories the loader scans. A "*.so" file written
there is taken once it is complete and stable (no event for the debounce
interval, every writer closed), loaded and checked like any candidate,
verified, and then, by the policy, reported ('report') or swapped in for the
movable handles that follow the request ('swap': when the request selects it,
or whatever the request selects after it, a rollback included). Every outcome
is a WatchEvent: given to on_event (called on the thread that processes:
the watch's own after start(), else the one calling process()) and kept in
the queue `events` either way.
"""
import collections
import ctypes
import queue
import weakref
from ctypes import byref, c_void_p

from . import _abi, _limits
from ._common import HandlekitError, _text
from ._core import Loader

WatchEvent = collections.namedtuple(
    'WatchEvent', 'kind status path plugin reason mtime_ns seen_ns done_ns')
WatchEvent.__doc__ = """One event of a Watch. kind: 'loaded', 'swapped', 'not-taken',
'refused' or 'directory'; status: a handlekit.Status (OK but for refused and
directory); path: the file or directory; plugin: the build (a Plugin) or
None; reason: one line; mtime_ns: the file's modification time when taken
(CLOCK_REALTIME ns); seen_ns: the watch's last event about it and done_ns:
when this event was made (both time.monotonic_ns())."""


def _destroy(lib, ptr, keep):
    """Watch's finalizer: stops its thread and frees it (keep: the callback
    and the loader, alive until then)."""
    lib.hk_watch_destroy(ptr)


class Watch:
    """hk_watch_create on loader. policy 'swap' (request needed: "NAME" or
    "NAME@RANGE") or 'report' (request optional: each new build of its name
    is reported as selected or not). debounce_ms 0 is the default (200 ms).
    Drive it with start() (a thread of its own), or add fileno() to your own
    select/poll loop and call process() when it is readable. close() (or
    the end of a with block) stops it; what it loaded stays loaded."""

    def __init__(self, loader, request=None, policy='swap', debounce_ms=0, on_event=None,
                 hold_after_us=0):
        if not isinstance(loader, Loader):
            raise TypeError('loader must be a handlekit.Loader, not %s' % type(loader).__name__)
        if policy not in ('swap', 'report'):
            raise ValueError("policy must be 'swap' or 'report', not %r" % (policy,))
        if on_event is not None and not callable(on_event):
            raise TypeError('on_event must be callable, not %s' % type(on_event).__name__)
        L = loader._lib
        if not hasattr(L, 'hk_watch_create'):
            raise HandlekitError(_abi.Status.NOT_SUPPORTED,
                                 'the loader library has no hk_watch_create')
        self.loader, self.events, self._on_event, self.errors = loader, queue.Queue(), on_event, []
        swap = _abi.SwapOptions(size=ctypes.sizeof(_abi.SwapOptions))
        swap.hold_after_us = _limits.int64(hold_after_us, 'hold_after_us')
        self._cb = _abi.WatchFn(self._event)
        opts = _abi.WatchOptions(
            size=ctypes.sizeof(_abi.WatchOptions),
            policy=_abi.WATCH_SWAP if policy == 'swap' else _abi.WATCH_REPORT,
            request=None if request is None else _limits.cstring(request, 'request'),
            debounce_ms=_limits.uint32(debounce_ms, 'debounce_ms'), on_event=self._cb,
            swap=ctypes.pointer(swap))
        out = c_void_p()
        st = L.hk_watch_create(loader._p(), byref(opts), byref(out))
        if st != _abi.Status.OK:
            raise HandlekitError(st, loader.last_error)
        self._ptr = out.value
        self._finalizer = weakref.finalize(self, _destroy, L, self._ptr, (self._cb, loader))

    def _event(self, user, ev):
        e = ev.contents
        plugin = self.loader._wrap(e.plugin) if e.plugin else None
        kind = _abi.WATCH_KINDS[e.kind] if 0 < e.kind < len(_abi.WATCH_KINDS) else 'unknown'
        event = WatchEvent(kind, _abi.Status(e.status) if e.status in _abi.Status._value2member_map_
                           else e.status, _text(e.path), plugin, _text(e.reason), e.mtime_ns,
                           e.seen_ns, e.done_ns)
        self.events.put(event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception as exc:  # kept for the host: a callback never stops the watch
                self.errors.append(exc)

    def _p(self):
        if not self._finalizer.alive:
            raise HandlekitError(_abi.Status.INVALID_HANDLE, 'the watch was closed')
        return self._ptr

    def fileno(self):
        """The descriptor that is readable when process() has work."""
        return self.loader._lib.hk_watch_fd(self._p())

    def process(self):
        """Handles what is pending (never waits for an event)."""
        st = self.loader._lib.hk_watch_process(self._p())
        if st != _abi.Status.OK:
            raise HandlekitError(st, self.loader.last_error)

    def start(self):
        """Processes on a thread of the watch until close()."""
        st = self.loader._lib.hk_watch_start(self._p())
        if st != _abi.Status.OK:
            raise HandlekitError(st, self.loader.last_error)

    def next_event(self, kind=None, timeout=None):
        """The next event (of kind, when given; others are passed over),
        waiting up to timeout seconds (None: for ever); None on timeout."""
        import time
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                e = self.events.get(timeout=left)
            except queue.Empty:
                return None
            if kind is None or e.kind == kind:
                return e

    def close(self):
        """hk_watch_destroy: stops the thread and the watch (idempotent)."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
