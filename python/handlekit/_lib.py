"""Finding and declaring the shared loader library, libhkloader.so.

Looked for, in order: the file named by HK_LOADER_LIBRARY; the copy the
wheel carries (handlekit/_kit/lib, with its plugins and hk-probe beside it);
libhkloader.so.1 through the dynamic linker's search (LD_LIBRARY_PATH, the
system's library directories, /usr/local/lib once `scons install` ran and
ldconfig knows it); <prefix>/lib/libhkloader.so.1 for the prefixes this
package sits under; then the libdir pkg-config gives for handlekit (an
install to a private prefix, its <libdir>/pkgconfig in PKG_CONFIG_PATH).
"""
import ctypes
import os
import shutil
import subprocess
from ctypes import POINTER, c_char_p, c_size_t, c_uint32, c_void_p

from . import _abi

SONAME = 'libhkloader.so.%d' % _abi.ABI_MAJOR

_lib = None


def _pkg_config_libdir():
    """handlekit's libdir as pkg-config gives it, or None."""
    tool = shutil.which('pkg-config')
    if not tool:
        return None
    try:
        proc = subprocess.run([tool, '--variable=libdir', 'handlekit'], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    out = proc.stdout.decode(errors='replace').strip()
    return out if proc.returncode == 0 and out else None


def _candidates():
    """The places to try, in order; pkg-config is asked only when the others failed."""
    env = os.environ.get('HK_LOADER_LIBRARY')
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, '_kit', 'lib', SONAME)
    if os.path.exists(bundled):
        yield bundled
    yield SONAME
    # An installed package: <prefix>/lib/pythonX.Y/site-packages/handlekit.
    for up in (3, 4):
        prefix = os.path.normpath(os.path.join(here, *(['..'] * up)))
        yield os.path.join(prefix, 'lib', SONAME)
    libdir = _pkg_config_libdir()
    if libdir:
        yield os.path.join(os.path.abspath(libdir), SONAME)


def _declare(lib):
    plugin, loader = c_void_p, c_void_p
    sigs = {
        'hk_loader_create': (_abi.status_t, [POINTER(_abi.LoaderOptions), POINTER(c_void_p)]),
        'hk_loader_destroy': (_abi.status_t, [loader]),
        'hk_loader_scan': (_abi.status_t, [loader]),
        'hk_loader_open': (_abi.status_t, [loader, c_char_p, POINTER(c_void_p)]),
        'hk_loader_report_count': (c_size_t, [loader]),
        'hk_loader_report': (POINTER(_abi.LoadReport), [loader, c_size_t]),
        'hk_loader_plugin_count': (c_size_t, [loader]),
        'hk_loader_plugin': (plugin, [loader, c_size_t]),
        'hk_loader_find': (plugin, [loader, c_char_p]),
        'hk_loader_select': (_abi.status_t, [loader, c_char_p, POINTER(c_void_p)]),
        'hk_loader_last_error': (c_char_p, [loader]),
        'hk_plugin_name': (c_char_p, [plugin]),
        'hk_plugin_version': (c_char_p, [plugin]),
        'hk_plugin_path': (c_char_p, [plugin]),
        'hk_plugin_abi': (c_uint32, [plugin]),
        'hk_plugin_flags': (c_uint32, [plugin]),
        'hk_plugin_vtable': (c_void_p, [plugin]),
        'hk_plugin_table': (c_void_p, [plugin, c_char_p]),
        'hk_load_stage_name': (c_char_p, [ctypes.c_int]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    # Declared when the loader has them (older loaders lack some): the
    # package asks hasattr(lib, name) before it uses one.
    st, mh, vp = _abi.status_t, c_void_p, POINTER(c_void_p)
    optional = {
        'hk_plugin_get_table': (st, [plugin, c_char_p, c_void_p, c_size_t]),
        'hk_plugin_acquire': (None, [plugin]),
        'hk_plugin_release': (None, [plugin]),
        'hk_mhandle_create': (st, [loader, c_char_p, POINTER(_abi.CreateInfo), vp]),
        'hk_mhandle_create_on': (st, [plugin, POINTER(_abi.CreateInfo), vp]),
        'hk_mhandle_destroy': (st, [mh]),
        'hk_mhandle_handle': (c_void_p, [mh]),
        'hk_mhandle_vtable': (c_void_p, []),
        'hk_mhandle_get_table': (st, [c_char_p, c_void_p, c_size_t]),
        'hk_mhandle_state': (st, [mh, POINTER(_abi.MhandleState)]),
        'hk_mhandle_pin': (st, [mh, c_char_p, POINTER(_abi.MhandlePin)]),
        'hk_mhandle_unpin': (None, [POINTER(_abi.MhandlePin)]),
        'hk_loader_swap': (st, [loader, c_char_p, POINTER(_abi.SwapOptions), vp]),
        'hk_loader_swap_prepare': (st, [loader, c_char_p, POINTER(_abi.SwapOptions), vp]),
        'hk_loader_swap_commit': (st, [c_void_p, vp]),
        'hk_loader_swap_cancel': (st, [c_void_p]),
        'hk_loader_swap_state': (st, [loader, POINTER(_abi.SwapState)]),
        'hk_loader_swap_stats': (st, [loader, POINTER(ctypes.c_uint64), c_size_t,
                                      POINTER(c_size_t)]),
        'hk_swap_stat_name': (c_char_p, [ctypes.c_int]),
        'hk_plugin_swap_state': (st, [plugin, POINTER(_abi.SwapPluginState)]),
        'hk_swap_phase_name': (c_char_p, [ctypes.c_int]),
        'hk_module_state_name': (c_char_p, [ctypes.c_int]),
        'hk_watch_create': (st, [loader, POINTER(_abi.WatchOptions), vp]),
        'hk_watch_fd': (ctypes.c_int, [c_void_p]),
        'hk_watch_process': (st, [c_void_p]),
        'hk_watch_start': (st, [c_void_p]),
        'hk_watch_destroy': (st, [c_void_p]),
        'hk_watch_kind_name': (c_char_p, [ctypes.c_int]),
    }
    for name, (res, args) in optional.items():
        if hasattr(lib, name):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
    return lib


def lib():
    """The loaded library, declared; OSError naming every place tried when none loads."""
    global _lib
    if _lib is None:
        errors = []
        for cand in _candidates():
            if os.sep in cand and not os.path.exists(cand):
                errors.append('%s: no such file' % cand)
                continue
            try:
                _lib = _declare(ctypes.CDLL(cand))
                break
            except OSError as e:
                errors.append(str(e))
        if _lib is None:
            raise OSError('handlekit: cannot load the loader library %s (set HK_LOADER_LIBRARY '
                          'to its path, install it with `scons install`, or name a private '
                          'prefix\'s <libdir>/pkgconfig in PKG_CONFIG_PATH): %s'
                          % (SONAME, '; '.join(errors)))
    return _lib
