"""Movable handles and live swap (plugin_api/hk_swap.h).

A MovableHandle is made through the loader and is not tied to one plugin:
its calls go to the implementation it is bound to at that moment, and a swap
binds every movable handle of the loader to another implementation while
other threads keep calling (ctypes lets go of the GIL during each call). Its
ops, stream, pointer mode and hk.memory/1 table are Handle's, through the
loader's forwarding vtable and tables.
"""
import atexit
import collections
import ctypes
import os
import threading
import weakref
from ctypes import byref, c_size_t, c_void_p

from . import _abi, _limits
from ._common import HandlekitError, _fields, _name, _need, _text
from ._handle import Handle, create_info
from ._plugin import Plugin


# Set by an exit hook that runs before weakref.finalize's own (see
# PreparedSwap): while the interpreter exits, a movable handle is left
# rather than destroyed when a prepared swap no thread can cancel any more
# holds its loader's swap lock, since the destroy would wait for it forever.
_exiting = False
_exit_hook = False


def _set_exiting():
    global _exiting
    _exiting = True


def _orphans(loader):
    """The loader's prepared swaps dropped on another thread than the one that
    prepared them (deque of (ptr, owner)): only that thread may cancel them."""
    return loader.__dict__.setdefault('_orphan_swaps', collections.deque())


def _cancel_orphans(loader):
    """Cancels the dropped prepared swaps of this thread on loader, before a
    call that would otherwise wait for them forever."""
    orphans, me = _orphans(loader), threading.get_ident()
    for _ in range(len(orphans)):
        try:
            ptr, owner = orphans.popleft()
        except IndexError:  # another thread took the last ones meanwhile
            return
        if owner == me:
            loader._lib.hk_loader_swap_cancel(ptr)
        else:
            orphans.append((ptr, owner))


def _drop(loader, ptr, owner):
    """PreparedSwap's finalizer: runs once, wherever the last reference went
    (or at exit), and holds loader until then. The cancel needs the thread
    that prepared it (the swap lock is that thread's); another thread leaves
    it for that thread's next create, destroy or swap through the package, as
    waiting for it here could wait forever."""
    if threading.get_ident() == owner:
        loader._lib.hk_loader_swap_cancel(ptr)  # OK: nothing to report to anyone
    else:
        _orphans(loader).append((ptr, owner))


def _destroy_mhandle(loader, mh):
    """MovableHandle's finalizer."""
    _cancel_orphans(loader)
    if _exiting and _orphans(loader):
        return  # would wait for a swap that no thread will end
    loader._lib.hk_mhandle_destroy(mh)


def _request(request):
    """A request's C string: "NAME", "NAME@RANGE", a path, or a Plugin (its path)."""
    if isinstance(request, Plugin):
        request = request.path
    elif isinstance(request, os.PathLike):
        request = os.fspath(request)
    return _limits.cstring(request, 'request', path=True)


class MovableHandle(Handle):
    """A movable handle (hk_mhandle_t) of a loader: Handle's ops and settings,
    forwarded to the implementation it is bound to now (plugin); a swap moves
    it, with its stream and pointer mode, to another one. Use it in a with
    block, or call close()."""

    def __init__(self, loader, request, device=None, checked=False):
        L = loader._lib
        _cancel_orphans(loader)
        info = create_info(device, checked)
        out = c_void_p()
        if isinstance(request, Plugin):
            st = _need(L, 'hk_mhandle_create_on')(request._p(), byref(info), byref(out))
        else:
            st = _need(L, 'hk_mhandle_create')(loader._p(), _request(request), byref(info),
                                               byref(out))
        if st != _abi.Status.OK:
            raise HandlekitError(st, loader.last_error)
        self.loader = loader  # a loader is not destroyed while a movable handle lives
        self._mh = out.value
        self._ptr = L.hk_mhandle_handle(self._mh)
        self._vt = _abi.read_struct(_abi.Vtable, L.hk_mhandle_vtable())
        self._finalizer = weakref.finalize(self, _destroy_mhandle, loader, self._mh)
        self._setup(self.plugin.memory)

    def close(self):
        """hk_mhandle_destroy: destroys the movable handle and the plugin handle
        it is bound to; later calls raise. HandlekitError BUSY (nothing
        destroyed) while another thread has a call in flight on it."""
        if not self._finalizer.alive:
            return
        _cancel_orphans(self.loader)
        st = self.loader._lib.hk_mhandle_destroy(self._mh)
        if st == _abi.Status.BUSY:
            raise HandlekitError(st, 'a call is in flight on the movable handle')
        self._finalizer.detach()
        self._ptr = None
        if st != _abi.Status.OK:
            raise HandlekitError(st, 'the destroy of its plugin handle failed')

    def state(self):
        """hk_mhandle_state as a dict: plugin (the current Plugin), generation
        (how often it was switched), inflight (calls in flight on it now)."""
        s = _abi.MhandleState(size=ctypes.sizeof(_abi.MhandleState))
        st = self.loader._lib.hk_mhandle_state(self._h(), byref(s))
        if st != _abi.Status.OK:
            raise HandlekitError(st, 'hk_mhandle_state failed')
        return {'plugin': self.loader._wrap(s.plugin), 'generation': s.generation,
                'inflight': s.inflight}

    @property
    def plugin(self):
        """The Plugin the handle is bound to now (a swap may change it right after)."""
        return self.state()['plugin']

    def pin(self, table):
        """hk_mhandle_pin: the implementation's own handle and its table named
        table (any table but hk.trim/1, a plugin's own ops included), held
        for the length of a with block: a swap meanwhile waits for it before
        it destroys that handle. Use as
            with mh.pin('example.ops/1') as p:
                ops = p.table_as(ExampleOpsV1)   # a ctypes Structure of the table
                ops.scale(p.handle, n, byref(alpha), x)
        HandlekitError NOT_FOUND when the implementation has no such table.
        Unpin on the thread that pinned (the with block does)."""
        return Pin(self, table)

    def _fetch_table(self, name, cls):
        out = cls()
        st = self.loader._lib.hk_mhandle_get_table(_limits.cstring(name, 'table name'),
                                                   byref(out), ctypes.sizeof(cls))
        if st == _abi.Status.NOT_FOUND:
            return None
        if st != _abi.Status.OK:
            raise HandlekitError(st, 'hk_mhandle_get_table(%s) failed' % name)
        return out


class Pin:
    """A pin of a movable handle (MovableHandle.pin): handle is the
    implementation's own handle (an int address) for the table's slots,
    table the address of the loader's copy of the table, plugin the Plugin
    it belongs to."""

    def __init__(self, mh, table):
        fn = _need(mh.loader._lib, 'hk_mhandle_pin')
        self._mh = mh
        self._pin = _abi.MhandlePin(size=ctypes.sizeof(_abi.MhandlePin))
        st = fn(mh._h(), _limits.cstring(table, 'table'), byref(self._pin))
        if st != _abi.Status.OK:
            raise HandlekitError(st, _text(mh._vt.last_error(mh._ptr)) or 'hk_mhandle_pin failed')
        self.handle = self._pin.handle
        self.table = self._pin.table
        self.plugin = mh.loader._wrap(self._pin.plugin)

    def table_as(self, cls):
        """The table as an instance of the ctypes Structure cls (a copy of
        min(its size field, sizeof(cls)) bytes, the rest zero)."""
        size = ctypes.c_size_t.from_address(self.table).value
        out = cls()
        ctypes.memmove(byref(out), self.table, min(size, ctypes.sizeof(cls)))
        return out

    def unpin(self):
        """hk_mhandle_unpin (again: nothing)."""
        self._mh.loader._lib.hk_mhandle_unpin(byref(self._pin))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unpin()
        return False


def _verify_fn(verify):
    """A C callback for hk_swap_options_t.verify around the Python callable
    verify(plugin_address, handle_address) -> None (raise to refuse: the
    exception's text is the reason, HandlekitError's status is kept)."""
    if verify is None:
        return _abi.SwapVerifyFn()
    if not callable(verify):
        raise TypeError('verify must be callable, not %s' % type(verify).__name__)

    def call(user, plugin, handle, why, why_len):
        try:
            verify(plugin, handle)
            return _abi.Status.OK
        except Exception as e:  # a refusal, whatever its kind: the swap says why
            st = e.status if isinstance(e, HandlekitError) else _abi.Status.INTERNAL
            text = (str(e) or type(e).__name__).encode('utf-8', 'replace')
            text = text.replace(b'\n', b' ')[:max(why_len - 1, 0)]
            if why and why_len:
                ctypes.memmove(why, text + b'\0', len(text) + 1)
            return st
    return _abi.SwapVerifyFn(call)


def _options(from_name, hold_after_us, verify=None, keep_old=False):
    o = _abi.SwapOptions(size=ctypes.sizeof(_abi.SwapOptions), keep_old=1 if keep_old else 0)
    if from_name is not None:
        setattr(o, 'from', _limits.cstring(from_name, 'from_name'))  # the struct keeps the bytes
    o.hold_after_us = _limits.int64(hold_after_us, 'hold_after_us')
    o.verify = _verify_fn(verify)
    o._keep = o.verify  # the callback lives as long as the options
    return o


def swap(loader, request, from_name, hold_after_us, verify=None, keep_old=False):
    fn = _need(loader._lib, 'hk_loader_swap')
    opts, to = _options(from_name, hold_after_us, verify, keep_old), c_void_p()
    _cancel_orphans(loader)
    st = fn(loader._p(), _request(request), byref(opts), byref(to))
    if st != _abi.Status.OK:
        raise HandlekitError(st, loader.last_error)
    return loader._wrap(to.value)


class PreparedSwap:
    """A swap prepared (hk_loader_swap_prepare) and waiting for commit() or
    cancel(), which the thread that prepared it must call; meanwhile that
    thread must not create, destroy or swap movable handles of the loader.
    A with block cancels it on leaving unless it was committed. One dropped
    without either is cancelled: at once on the thread that prepared it (or
    at the interpreter's exit from the main thread), else at that thread's
    next movable-handle create, close or swap of the loader."""

    def __init__(self, loader, request, from_name=None, hold_after_us=0):
        global _exit_hook
        fn = _need(loader._lib, 'hk_loader_swap_prepare')
        self.loader = loader
        opts, out = _options(from_name, hold_after_us), c_void_p()
        _cancel_orphans(loader)
        st = fn(loader._p(), _request(request), byref(opts), byref(out))
        if st != _abi.Status.OK:
            raise HandlekitError(st, loader.last_error)
        self._owner = threading.get_ident()
        self._finalizer = weakref.finalize(self, _drop, loader, out.value, self._owner)
        if not _exit_hook:
            # The loader made a weakref.finalize already, so its exit hook is
            # registered; exit hooks run last first, so this one runs before.
            atexit.register(_set_exiting)
            _exit_hook = True

    def _take(self):
        """The C pointer, once: detached from the finalizer, which so never
        cancels what commit or cancel ended."""
        if threading.get_ident() != self._owner:
            raise HandlekitError(_abi.Status.INVALID_VALUE,
                                 'commit or cancel from another thread than the one that '
                                 'prepared the swap')
        taken = self._finalizer.detach()
        if taken is None:
            raise HandlekitError(_abi.Status.INVALID_VALUE,
                                 'the prepared swap was committed or cancelled already')
        _, _, (_, ptr, _), _ = taken
        return ptr

    def commit(self):
        """Switches every handle; returns the new Plugin."""
        to = c_void_p()
        st = self.loader._lib.hk_loader_swap_commit(self._take(), byref(to))
        if st != _abi.Status.OK:  # freed by the commit, also when it failed
            raise HandlekitError(st, self.loader.last_error)
        return self.loader._wrap(to.value)

    def cancel(self):
        """Gives the swap up: nothing moved."""
        st = self.loader._lib.hk_loader_swap_cancel(self._take())
        if st != _abi.Status.OK:
            raise HandlekitError(st, self.loader.last_error)

    @property
    def pending(self):
        return self._finalizer.alive

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.pending:
            self.cancel()


def loader_state(loader):
    s = _abi.SwapState(size=ctypes.sizeof(_abi.SwapState))
    st = _need(loader._lib, 'hk_loader_swap_state')(loader._p(), byref(s))
    if st != _abi.Status.OK:
        raise HandlekitError(st, 'hk_loader_swap_state failed')
    out = _fields(s)
    out['phase'] = _name(_abi.SWAP_PHASES, s.phase)
    return out


def loader_stats(loader):
    L = loader._lib
    known = c_size_t(0)
    st = _need(L, 'hk_loader_swap_stats')(loader._p(), None, 0, byref(known))
    if st != _abi.Status.OK:
        raise HandlekitError(st, 'hk_loader_swap_stats failed')
    values = (ctypes.c_uint64 * known.value)()
    st = L.hk_loader_swap_stats(loader._p(), values, known.value, None)
    if st != _abi.Status.OK:
        raise HandlekitError(st, 'hk_loader_swap_stats failed')
    return {_text(_need(L, 'hk_swap_stat_name')(i)): values[i] for i in range(known.value)}


def phase_names(loader):
    """The loader's own names of the swap phases and module states."""
    L = loader._lib
    return ([_text(L.hk_swap_phase_name(i)) for i in range(len(_abi.SWAP_PHASES))],
            [_text(L.hk_module_state_name(i)) for i in range(len(_abi.MODULE_STATES))])
