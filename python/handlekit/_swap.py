"""Movable handles and live swap (plugin_api/hk_swap.h).

A MovableHandle is made through the loader and is not tied to one plugin:
its calls go to the implementation it is bound to at that moment, and a swap
binds every movable handle of the loader to another implementation while
other threads keep calling (ctypes lets go of the GIL during each call). Its
ops, stream, pointer mode and hk.memory/1 table are Handle's, through the
loader's forwarding vtable and tables.
"""
import ctypes
import os
import weakref
from ctypes import byref, c_void_p

from . import _abi, _limits
from ._core import HandlekitError, Plugin, _text
from ._handle import Handle, create_info


def _need(L, name):
    if not hasattr(L, name):
        raise HandlekitError(_abi.Status.NOT_SUPPORTED, 'the loader library has no %s: movable '
                             'handles and swap need a loader of ABI 1.2' % name)
    return getattr(L, name)


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
        self._finalizer = weakref.finalize(self, L.hk_mhandle_destroy, self._mh)
        self._setup(self.plugin.memory)

    def close(self):
        """hk_mhandle_destroy: destroys the movable handle and the plugin handle
        it is bound to; later calls raise. HandlekitError BUSY (nothing
        destroyed) while another thread has a call in flight on it."""
        if not self._finalizer.alive:
            return
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

    def _fetch_table(self, name, cls):
        out = cls()
        st = self.loader._lib.hk_mhandle_get_table(_limits.cstring(name, 'table name'),
                                                   byref(out), ctypes.sizeof(cls))
        if st == _abi.Status.NOT_FOUND:
            return None
        if st != _abi.Status.OK:
            raise HandlekitError(st, 'hk_mhandle_get_table(%s) failed' % name)
        return out


def _options(from_name, hold_after_us):
    o = _abi.SwapOptions(size=ctypes.sizeof(_abi.SwapOptions))
    if from_name is not None:
        setattr(o, 'from', _limits.cstring(from_name, 'from_name'))  # the struct keeps the bytes
    o.hold_after_us = _limits.int64(hold_after_us, 'hold_after_us')
    return o


def swap(loader, request, from_name, hold_after_us):
    fn = _need(loader._lib, 'hk_loader_swap')
    opts, to = _options(from_name, hold_after_us), c_void_p()
    st = fn(loader._p(), _request(request), byref(opts), byref(to))
    if st != _abi.Status.OK:
        raise HandlekitError(st, loader.last_error)
    return loader._wrap(to.value)


class PreparedSwap:
    """A swap prepared (hk_loader_swap_prepare) and waiting for commit() or
    cancel(), which the thread that prepared it must call; meanwhile that
    thread must not create, destroy or swap movable handles of the loader.
    A with block cancels it on leaving unless it was committed."""

    def __init__(self, loader, request, from_name=None, hold_after_us=0):
        fn = _need(loader._lib, 'hk_loader_swap_prepare')
        self.loader = loader
        opts, out = _options(from_name, hold_after_us), c_void_p()
        st = fn(loader._p(), _request(request), byref(opts), byref(out))
        if st != _abi.Status.OK:
            raise HandlekitError(st, loader.last_error)
        self._ptr = out.value

    def _take(self):
        if self._ptr is None:
            raise HandlekitError(_abi.Status.INVALID_VALUE,
                                 'the prepared swap was committed or cancelled already')
        return self._ptr

    def commit(self):
        """Switches every handle; returns the new Plugin."""
        to = c_void_p()
        st = self.loader._lib.hk_loader_swap_commit(self._take(), byref(to))
        if st == _abi.Status.INVALID_VALUE:
            raise HandlekitError(st, 'commit from another thread than the one that prepared')
        self._ptr = None  # freed by the commit, also when it failed
        if st != _abi.Status.OK:
            raise HandlekitError(st, self.loader.last_error)
        return self.loader._wrap(to.value)

    def cancel(self):
        """Gives the swap up: nothing moved."""
        st = self.loader._lib.hk_loader_swap_cancel(self._take())
        if st != _abi.Status.OK:
            raise HandlekitError(st, 'cancel from another thread than the one that prepared')
        self._ptr = None

    @property
    def pending(self):
        return self._ptr is not None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._ptr is not None:
            self.cancel()


def _fields(struct, skip=('size',)):
    return {name: getattr(struct, name) for name, _ in struct._fields_ if name not in skip}


def _name(names, value):
    return names[value] if 0 <= value < len(names) else 'unknown'


def loader_state(loader):
    s = _abi.SwapState(size=ctypes.sizeof(_abi.SwapState))
    st = _need(loader._lib, 'hk_loader_swap_state')(loader._p(), byref(s))
    if st != _abi.Status.OK:
        raise HandlekitError(st, 'hk_loader_swap_state failed')
    out = _fields(s)
    out['phase'] = _name(_abi.SWAP_PHASES, s.phase)
    return out


def plugin_state(plugin):
    L = plugin.loader._lib
    s = _abi.SwapPluginState(size=ctypes.sizeof(_abi.SwapPluginState))
    st = _need(L, 'hk_plugin_swap_state')(plugin._p(), byref(s))
    if st != _abi.Status.OK:
        raise HandlekitError(st, 'hk_plugin_swap_state failed')
    out = _fields(s)
    out['module'] = _name(_abi.MODULE_STATES, s.module)
    return out


def phase_names(loader):
    """The loader's own names of the swap phases and module states."""
    L = loader._lib
    return ([_text(L.hk_swap_phase_name(i)) for i in range(len(_abi.SWAP_PHASES))],
            [_text(L.hk_module_state_name(i)) for i in range(len(_abi.MODULE_STATES))])
