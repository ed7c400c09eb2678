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

Errors are HandlekitError with .status (a Status) and .reason (the plugin's
one-line reason).
"""
import os

from ._abi import ABI_MAJOR, ABI_MINOR, Status
from ._arrays import CUDA, HOST
from ._core import HandlekitError, Handle, Loader, LoadReport, Plugin, stream_address

__version__ = '%d.%d.0' % (ABI_MAJOR, ABI_MINOR)
__all__ = ['ABI_MAJOR', 'ABI_MINOR', 'CUDA', 'HOST', 'HandlekitError', 'Handle', 'Loader',
           'LoadReport', 'Plugin', 'Status', 'default_loader', 'load', 'plugins', 'reports',
           'stream_address']

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
    """A plugin by name ("hk-cpu") from the default loader, or by path to a .so
    file; HandlekitError (NOT_FOUND, or the loader's refusal) otherwise."""
    loader = default_loader()
    if isinstance(name_or_path, os.PathLike):
        name_or_path = os.fspath(name_or_path)
    if not isinstance(name_or_path, str):
        raise TypeError('load takes a plugin name or a path (str), not %s'
                        % type(name_or_path).__name__)
    if '/' in name_or_path or name_or_path.endswith('.so'):
        return loader.open(name_or_path)
    p = loader.find(name_or_path)
    if p is None:
        why = [r for r in loader.reports if not r.loaded
               and r.path.endswith('/' + name_or_path + '.so')]
        raise HandlekitError(Status.NOT_FOUND, '%s: %s' % (name_or_path, why[0].reason if why
                                                           else 'no such plugin was found'))
    return p
