"""handlekit for Python: load handlekit plugins and run their hk.blas1/1 ops on
NumPy arrays (host plugins such as hk-cpu) and on PyTorch, CuPy or Numba CUDA
arrays (CUDA plugins such as hk-cuda), through the shared loader library
libhkloader.so (ctypes; nothing to compile).

    import numpy as np, handlekit
    cpu = handlekit.load('hk-cpu')
    with cpu.handle() as h:
        x = np.arange(4, dtype=np.float32); y = np.ones(4, dtype=np.float32)
        h.axpy(2.0, x, y)          # y = 2x + y
        print(h.dot(x, y), h.nrm2(x))

Handle.load_library loads the caller's own CUDA kernels (hk.kernels/1).
Movable handles (mhandle) are moved by a swap to another implementation
while threads call through them (plugin_api/hk_swap.h). Errors are
HandlekitError with .status (a Status) and .reason (the plugin's or the
loader's one-line reason); values C cannot take are ValueError or TypeError.
"""
import os

from ._abi import ABI_MAJOR, ABI_MINOR, Status
from ._arrays import CUDA, HOST
from ._core import HandlekitError, Loader, LoadReport, Plugin, stream_address
from ._handle import Handle
from ._kernels import Kernel, KernelLibrary
from ._swap import MovableHandle, PreparedSwap
from ._watch import Watch, WatchEvent

__version__ = '%d.%d.0' % (ABI_MAJOR, ABI_MINOR)
__all__ = ['ABI_MAJOR', 'ABI_MINOR', 'CUDA', 'HOST', 'HandlekitError', 'Handle', 'Kernel',
           'KernelLibrary', 'Loader', 'LoadReport', 'MovableHandle', 'Plugin', 'PreparedSwap',
           'Status', 'default_loader', 'load', 'mhandle', 'plugins', 'reports',
           'stream_address', 'swap', 'swap_prepare', 'swap_state', 'swap_stats', 'Watch',
           'WatchEvent']

_default = None


def default_loader():
    """The package's loader, made and scanned on first use: HK_PLUGIN_PATH, then
    the plugin directory of the installed libhkloader.so."""
    global _default
    if _default is None:
        _default = Loader().scan()
    return _default


def plugins():
    """Every plugin the default loader loaded."""
    return default_loader().plugins


def reports():
    """What the default loader found: one LoadReport per candidate file."""
    return default_loader().reports


def load(name_or_path):
    """A plugin of the default loader by request: a name ("hk-cpu": its highest
    version), NAME@RANGE ("hk-cuda@^0.1", as hk_loader_select, with
    HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE), or a path to a .so file;
    HandlekitError otherwise: NOT_FOUND whose reason is the loader's, a
    summary line naming the versions found, then one line for each candidate
    of that name it refused (a file of that name, a directory of the search
    path) and why; INVALID_VALUE for a malformed range; or the loader's
    refusal of a path."""
    loader = default_loader()
    if isinstance(name_or_path, os.PathLike):
        name_or_path = os.fspath(name_or_path)
    if not isinstance(name_or_path, str):
        raise TypeError('load takes a plugin name or a path (str), not %s'
                        % type(name_or_path).__name__)
    if '/' in name_or_path or name_or_path.endswith('.so'):
        return loader.open(name_or_path)
    return loader.select(name_or_path)


def mhandle(request, device=None, checked=False):
    """A MovableHandle of the default loader on the plugin request resolves
    to ("hk-cpu", "hk-cuda@^0.1", a path): Loader.mhandle."""
    return default_loader().mhandle(request, device=device, checked=checked)


def swap(request, from_name=None, hold_after_us=0, keep_old=False):
    """Moves the default loader's movable handles to request: Loader.swap."""
    return default_loader().swap(request, from_name=from_name, hold_after_us=hold_after_us,
                                 keep_old=keep_old)


def swap_prepare(request, from_name=None, hold_after_us=0):
    """Loader.swap_prepare on the default loader."""
    return default_loader().swap_prepare(request, from_name=from_name,
                                         hold_after_us=hold_after_us)


def swap_state():
    """Loader.swap_state of the default loader."""
    return default_loader().swap_state()


def swap_stats():
    """Loader.swap_stats of the default loader."""
    return default_loader().swap_stats()
