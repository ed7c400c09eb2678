"""The loader over libhkloader.so (its plugins: _plugin.py, their handles:
_handle.py); it re-exports the names the package took from here before."""
import ctypes
import os
import threading
import warnings
import weakref
from ctypes import byref, c_void_p

from . import _abi, _arrays, _limits
from ._common import HandlekitError, _text, stream_address, to_status  # noqa: F401
from ._lib import lib
from ._plugin import Plugin

HOST, CUDA = _arrays.HOST, _arrays.CUDA


class LoadReport:
    """One candidate file the loader looked at (hk_load_report_t)."""

    def __init__(self, r):
        self.path = _text(r.path)
        self.stage = _abi.STAGE_NAMES[r.stage] if 0 <= r.stage < 6 else str(r.stage)
        self.status = to_status(r.status)
        self.reason = _text(r.reason)
        self.loaded = bool(r.plugin)

    def __repr__(self):
        if self.loaded:
            return '<LoadReport %s loaded>' % self.path
        return '<LoadReport %s %s %s: %s>' % (self.path, self.stage, self.status.name
                                              if hasattr(self.status, 'name') else self.status,
                                              self.reason)


class Loader:
    """A plugin loader (hk_loader_t). default_dir None: the shared library's own
    plugin directory (<libdir>/handlekit/plugins); HK_PLUGIN_PATH is searched
    first unless ignore_env. log(level, message) gets the loader's and the
    plugins' log lines. Call scan() to load every plugin found, or open(path)."""

    def __init__(self, default_dir=None, ignore_env=False, log=None):
        self._lib = lib()
        opts = _abi.LoaderOptions(size=ctypes.sizeof(_abi.LoaderOptions))
        if default_dir is not None:
            self._default_dir = _limits.cstring(default_dir, 'default_dir', path=True)
            opts.default_dir = self._default_dir
        opts.ignore_env = 1 if ignore_env else 0
        self._log = None
        if log is not None and not callable(log):
            # Found out only at the first log line, in a ctypes callback, where
            # the exception cannot reach the caller.
            raise TypeError('log must be callable as log(level, message), not %s'
                            % type(log).__name__)
        if log is not None:
            def _log(user, level, msg, _fn=log):
                _fn(level, _text(msg))
            self._log = _abi.log_fn(_log)  # kept alive as long as the loader
            opts.log = self._log
        ptr = c_void_p()
        st = self._lib.hk_loader_create(byref(opts), byref(ptr))
        if st != _abi.Status.OK:
            raise HandlekitError(st, 'hk_loader_create refused the options')
        self._ptr = ptr.value
        self._ignore_env = bool(ignore_env)
        self._env_warned = False
        self._plugins = {}
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, self._lib.hk_loader_destroy, self._ptr)

    def _p(self):
        if self._ptr is None:
            raise HandlekitError(_abi.Status.INVALID_HANDLE, 'the loader was closed')
        return self._ptr

    def close(self):
        """hk_loader_destroy: closes the modules and frees the loader; its
        plugins are unusable afterwards. HandlekitError BUSY (and nothing
        done) while a Handle of one of its plugins or a movable handle lives."""
        if not self._finalizer.alive:
            return
        from . import _swap
        _swap._cancel_orphans(self)
        st = self._lib.hk_loader_destroy(self._ptr)
        if st != _abi.Status.OK:
            raise HandlekitError(st, 'the loader has live handles or held plugins'
                                 if st == _abi.Status.BUSY else 'hk_loader_destroy failed')
        self._finalizer.detach()
        self._ptr = None

    def mhandle(self, request, device=None, checked=False):
        """A new MovableHandle (hk_mhandle_create) on the plugin request
        resolves to ("NAME", "NAME@RANGE", a path, or a Plugin of this
        loader): a handle that a swap moves to another implementation."""
        from ._swap import MovableHandle
        return MovableHandle(self, request, device=device, checked=checked)

    def swap(self, request, from_name=None, hold_after_us=0, verify=None, keep_old=False):
        """hk_loader_swap: moves the movable handles (only those whose plugin
        is named from_name, when given) to the plugin request resolves to,
        after verifying it (its self-check or the BLAS1 workload, then
        verify(plugin_address, handle_address) when given: raise to refuse);
        returns that Plugin. keep_old: the builds left behind stay open, so
        that a swap back loads nothing again. HandlekitError with the
        loader's reason when refused (nothing moved then)."""
        from . import _swap
        return _swap.swap(self, request, from_name, hold_after_us, verify, keep_old)

    def swap_prepare(self, request, from_name=None, hold_after_us=0):
        """hk_loader_swap_prepare: everything a swap does before the switch;
        returns a PreparedSwap to commit() or cancel() from this thread (a
        with block cancels it unless committed, and so does dropping it)."""
        from . import _swap
        return _swap.PreparedSwap(self, request, from_name, hold_after_us)

    def swap_state(self):
        """hk_loader_swap_state as a dict: phase (a name), handles, inflight,
        draining, libraries."""
        from . import _swap
        return _swap.loader_state(self)

    def swap_stats(self):
        """hk_loader_swap_stats as a dict: every statistic this loader
        library knows, by its own name (hk_swap_stat_name: 'swaps',
        'refused', 'last_switch_ns', ...; times in ns)."""
        from . import _swap
        return _swap.loader_stats(self)

    def scan(self):
        """Loads every plugin of the search path; returns self. Refused candidates
        are in reports(), not raised."""
        st = self._lib.hk_loader_scan(self._p())
        if st != _abi.Status.OK:
            raise HandlekitError(st, self.last_error)
        self._warn_env()
        return self

    def _warn_env(self):
        """Says, once per loader, what the environment changed: a refused
        directory of HK_PLUGIN_PATH, and each report of HK_PLUGIN_PATH,
        HK_PLUGIN_PIN or HK_PLUGIN_EXCLUDE (a malformed entry, or a variable
        ignored under elevated privileges), a warnings.warn each."""
        if self._env_warned:
            return
        self._env_warned = True
        names = ('HK_PLUGIN_PATH', 'HK_PLUGIN_PIN', 'HK_PLUGIN_EXCLUDE')
        dirs = [] if self._ignore_env else \
            [d for d in os.environ.get('HK_PLUGIN_PATH', '').split(':') if d]
        for r in self.reports:
            if r.loaded or r.stage != 'scan':
                continue
            if r.path in names:
                warnings.warn('%s: %s' % (r.path, r.reason), stacklevel=3)
            elif r.path in dirs:
                warnings.warn('HK_PLUGIN_PATH directory %s refused, nothing in it is '
                              'loaded: %s' % (r.path, r.reason), stacklevel=3)

    def open(self, path):
        """Loads one plugin file; HandlekitError with the loader's reason on refusal."""
        out = c_void_p()
        st = self._lib.hk_loader_open(self._p(), _limits.cstring(path, 'path', path=True),
                                      byref(out))
        if st != _abi.Status.OK:
            raise HandlekitError(st, self.last_error)
        return self._wrap(out.value)

    def _wrap(self, ptr):
        with self._lock:
            p = self._plugins.get(ptr)
            if p is None:
                p = self._plugins[ptr] = Plugin(self, ptr)
            return p

    @property
    def plugins(self):
        """Loaded plugins in load order."""
        ptr = self._p()
        n = self._lib.hk_loader_plugin_count(ptr)
        return [self._wrap(self._lib.hk_loader_plugin(ptr, i)) for i in range(n)]

    @property
    def reports(self):
        ptr = self._p()
        n = self._lib.hk_loader_report_count(ptr)
        return [LoadReport(self._lib.hk_loader_report(ptr, i).contents) for i in range(n)]

    def find(self, name):
        """The first loaded plugin of this name, or None."""
        ptr = self._lib.hk_loader_find(self._p(), _limits.cstring(name, 'name'))
        return self._wrap(ptr) if ptr else None

    def select(self, request):
        """hk_loader_select: the loaded plugin a request ("NAME", "NAME@RANGE",
        or a path) resolves to, with HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE
        applied; HandlekitError naming every candidate and why otherwise."""
        out = c_void_p()
        st = self._lib.hk_loader_select(self._p(), _limits.cstring(request, 'request', path=True),
                                        byref(out))
        self._warn_env()
        if st != _abi.Status.OK:
            raise HandlekitError(st, self.last_error)
        return self._wrap(out.value)

    @property
    def last_error(self):
        return _text(self._lib.hk_loader_last_error(self._p()))
