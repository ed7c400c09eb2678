"""A loaded plugin of a loader (hk_plugin_t)."""
import ctypes
from ctypes import byref, c_char_p, c_void_p

from . import _abi, _limits
from ._arrays import CUDA, HOST
from ._common import HandlekitError, _fields, _name, _need, _text


class Plugin:
    """A loaded plugin: name, version, path, ABI, flags, tables, and handles.

    A swap (Loader.swap) may close the module of a plugin nothing uses and
    open it again later: the plugin's code is reached only through what the
    loader gives at that moment, and a Handle holds the plugin (acquire) for
    as long as it lives, so that no swap closes the module under it."""

    def __init__(self, loader, ptr):
        self.loader = loader  # keeps the loader, and so the module, alive
        self._ptr = ptr
        L = loader._lib
        self.name = _text(L.hk_plugin_name(ptr))
        self.version = _text(L.hk_plugin_version(ptr))
        self.path = _text(L.hk_plugin_path(ptr))
        self.abi = _abi.abi_split(L.hk_plugin_abi(ptr))
        self.flags = L.hk_plugin_flags(ptr)

    def __repr__(self):
        return '<Plugin %s %s ABI %d.%d %s>' % (self.name, self.version, self.abi[0],
                                                self.abi[1], self.path)

    @property
    def memory(self):
        """HOST or CUDA when the plugin says (ABI 1.2 flags), else None."""
        if self.flags & _abi.PLUGIN_MEMORY_HOST:
            return HOST
        if self.flags & _abi.PLUGIN_MEMORY_CUDA:
            return CUDA
        return None

    def _p(self):
        self.loader._p()  # a closed loader freed its plugins
        return self._ptr

    @property
    def vtable(self):
        """A copy of the loader's copy of the vtable, read now: its slots are
        all NULL while a swap has the module closed. Its function pointers are
        valid while the plugin is held (acquire(), or a live Handle)."""
        return _abi.clear_newer(_abi.read_struct(_abi.Vtable,
                                                 self.loader._lib.hk_plugin_vtable(self._p())),
                                self.abi[1])

    def acquire(self):
        """hk_plugin_acquire: no swap closes the module, and the loader is not
        destroyed, until release()."""
        L = self.loader._lib
        if hasattr(L, 'hk_plugin_acquire'):
            L.hk_plugin_acquire(self._p())

    def release(self):
        L = self.loader._lib
        if hasattr(L, 'hk_plugin_release') and self.loader._ptr is not None:
            L.hk_plugin_release(self._ptr)

    @property
    def tables(self):
        """Names of the function tables the plugin offers."""
        self.acquire()
        try:
            names, fn = [], self.vtable.enum_tables
            if not fn:
                return names
            name = c_char_p()
            while fn(len(names), byref(name)) == _abi.Status.OK:
                names.append(_text(name.value))
            return names
        finally:
            self.release()

    def table(self, name, cls):
        """A zeroed cls holding min(the plugin's size, sizeof(cls)) bytes of the
        table, through hk_plugin_get_table when the loader has it; None when the
        plugin has no such table. Its function pointers are valid while the
        plugin is held (acquire(), or a live Handle of it)."""
        L = self.loader._lib
        bname = _limits.cstring(name, 'table name')
        if hasattr(L, 'hk_plugin_get_table'):
            out = cls()
            st = L.hk_plugin_get_table(self._p(), bname, byref(out), ctypes.sizeof(cls))
            if st == _abi.Status.NOT_FOUND:
                return None
            if st != _abi.Status.OK:
                raise HandlekitError(st, self.loader.last_error)
            return out
        ptr, vt = c_void_p(), self.vtable
        if not vt.get_table or vt.get_table(bname, byref(ptr)) != 0 or not ptr.value:
            return None
        return _abi.clear_newer(_abi.read_struct(cls, ptr.value), self.abi[1])

    def handle(self, device=None, checked=False):
        """A new Handle (use it in a with block, or call close())."""
        from ._handle import Handle
        return Handle(self, device=device, checked=checked)

    def swap_state(self):
        """hk_plugin_swap_state as a dict: module ('open', 'closed',
        'still-mapped'), handles, inflight, draining, closes, reopens."""
        L = self.loader._lib
        s = _abi.SwapPluginState(size=ctypes.sizeof(_abi.SwapPluginState))
        st = _need(L, 'hk_plugin_swap_state')(self._p(), byref(s))
        if st != _abi.Status.OK:
            raise HandlekitError(st, 'hk_plugin_swap_state failed')
        out = _fields(s)
        out['module'] = _name(_abi.MODULE_STATES, s.module)
        return out
