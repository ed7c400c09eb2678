"""ctypes mirrors of the C ABI in plugin_api/ (hk_abi.h, hk_loader.h,
hk_blas1.h, hk_memory.h, hk_status.h), field for field.

python/tests/test_layout.py checks every size and offset, every constant and
every status against a program compiled from those headers. A field that only
exists from some ABI minor on is listed in the struct's _since_ map; the
package reads a struct from C as min(its size, our sizeof) into a zeroed copy,
so a newer or older peer works as the C hosts do.
"""
import ctypes
import enum
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int32, c_int64,
                    c_size_t, c_uint32, c_uint64, c_void_p)

ABI_MAJOR = 1
ABI_MINOR = 2  # the newest minor whose structs this package mirrors


def abi_version(major, minor):
    return ((major & 0xffff) << 16) | (minor & 0xffff)


def abi_split(version):
    return (version >> 16, version & 0xffff)


STRUCT_NEGOTIATE_REQUEST = 0x484b0001
STRUCT_NEGOTIATE_ANSWER = 0x484b0002
PLUGIN_UNLOAD_SAFE = 0x1
PLUGIN_MEMORY_HOST = 0x2  # ABI 1.2: the plugin's memory is host memory
PLUGIN_MEMORY_CUDA = 0x4  # ABI 1.2: the plugin's memory is CUDA device memory
DEVICE_CURRENT = -1
CREATE_CHECKED = 0x1
POINTER_MODE_HOST = 0
POINTER_MODE_DEVICE = 1
LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG = 0, 1, 2, 3
STAGE_SCAN, STAGE_OPEN, STAGE_SYMBOL, STAGE_NEGOTIATE, STAGE_VALIDATE, STAGE_LOADED = range(6)
STAGE_NAMES = ('scan', 'open', 'symbol', 'negotiate', 'validate', 'loaded')

# hk_status.h's HK_STATUS_MAP: (name, value, message), in order.
STATUS_MAP = (
    ('OK', 0, 'success'),
    ('INVALID_VALUE', 1, 'an argument is out of range'),
    ('NULL_POINTER', 2, 'a required pointer argument is NULL'),
    ('INVALID_HANDLE', 3, 'the handle is NULL or not a live handle'),
    ('NOT_SUPPORTED', 4, 'the operation is not supported by this implementation'),
    ('OUT_OF_MEMORY', 5, 'memory could not be allocated'),
    ('NO_DRIVER', 6, 'no usable CUDA driver was found'),
    ('DRIVER_TOO_OLD', 7, 'the CUDA driver is older than the kernels need'),
    ('NO_DEVICE', 8, 'no CUDA device is available'),
    ('INVALID_DEVICE', 9, 'the device ordinal does not name a device'),
    ('CONTEXT_DESTROYED', 10, "the handle's CUDA context was destroyed"),
    ('CONTEXT_RESET', 11, "the handle's primary context was reset"),
    ('STREAM_MISMATCH', 12, "the stream belongs to another context than the handle's"),
    ('POINTER_MISMATCH', 13, "a pointer belongs to another device than the handle's"),
    ('FORKED', 14, 'the handle was made before fork(); CUDA is unusable in the child'),
    ('CUDA_ERROR', 15, 'the CUDA driver reported an error'),
    ('LAUNCH_FAILED', 16, 'a kernel launch failed'),
    ('ABI_MISMATCH', 17, 'the plugin and host ABI versions are incompatible'),
    ('LOAD_FAILED', 18, 'the plugin file could not be loaded'),
    ('NOT_FOUND', 19, 'the requested item was not found'),
    ('INSECURE', 20, 'a file or directory is writable by others'),
    ('INTERNAL', 21, 'internal error'),
    ('BUSY', 22, 'the object is still in use'),
    ('TIMED_OUT', 23, 'a call did not return within its deadline'),
)

Status = enum.IntEnum('Status', [(name, value) for name, value, _ in STATUS_MAP])
Status.__doc__ = 'hk_status_t: the status of every handlekit call (hk_status.h).'
STATUS_MESSAGES = {value: msg for _, value, msg in STATUS_MAP}

status_t = c_int  # an enum in C
handle_p = c_void_p
log_fn = CFUNCTYPE(None, c_void_p, c_int, c_char_p)


class StructHeader(Structure):
    _fields_ = [('struct_type', c_uint32), ('struct_size', c_uint32),
                ('struct_version', c_uint32)]


class NegotiateRequest(Structure):
    _fields_ = [('header', StructHeader), ('abi_min', c_uint32), ('abi_max', c_uint32),
                ('log', log_fn), ('log_user', c_void_p)]


class NegotiateAnswer(Structure):
    _fields_ = [('header', StructHeader), ('abi_version', c_uint32), ('flags', c_uint32),
                ('name', c_char_p), ('version', c_char_p), ('vtable', c_void_p)]


class CreateInfo(Structure):
    _fields_ = [('size', c_uint32), ('device', c_int32), ('flags', c_uint32)]


class HandleInfo(Structure):
    _fields_ = [('size', c_uint32), ('device', c_int32), ('context_id', c_uint64),
                ('owns_primary', c_int32), ('flags', c_uint32), ('plugin_name', c_char_p)]


class Vtable(Structure):
    _fields_ = [
        ('size', c_size_t),
        # ABI 1.0
        ('handle_create', CFUNCTYPE(status_t, POINTER(CreateInfo), POINTER(handle_p))),
        ('handle_destroy', CFUNCTYPE(status_t, handle_p)),
        ('set_stream', CFUNCTYPE(status_t, handle_p, c_void_p)),
        ('get_stream', CFUNCTYPE(status_t, handle_p, POINTER(c_void_p))),
        ('set_pointer_mode', CFUNCTYPE(status_t, handle_p, c_int)),
        ('get_pointer_mode', CFUNCTYPE(status_t, handle_p, POINTER(c_int))),
        ('last_error', CFUNCTYPE(c_char_p, handle_p)),
        ('get_table', CFUNCTYPE(status_t, c_char_p, POINTER(c_void_p))),
        ('enum_tables', CFUNCTYPE(status_t, c_size_t, POINTER(c_char_p))),
        # ABI 1.1
        ('handle_info', CFUNCTYPE(status_t, handle_p, POINTER(HandleInfo))),
        ('synchronize', CFUNCTYPE(status_t, handle_p)),
        # ABI 1.2: only its place is mirrored; the package does not call it.
        ('last_error_copy', c_void_p),
    ]
    _since_ = {'handle_info': 1, 'synchronize': 1, 'last_error_copy': 2}


TABLE_BLAS1_V1 = b'hk.blas1/1'
TABLE_MEMORY_V1 = b'hk.memory/1'

_p = c_void_p  # every array, scalar and result pointer is passed as an address
_axpy = CFUNCTYPE(status_t, handle_p, c_int64, _p, _p, c_int64, _p, c_int64)
_scal = CFUNCTYPE(status_t, handle_p, c_int64, _p, _p, c_int64)
_copy = CFUNCTYPE(status_t, handle_p, c_int64, _p, c_int64, _p, c_int64)
_dot = CFUNCTYPE(status_t, handle_p, c_int64, _p, c_int64, _p, c_int64, _p)
_nrm2 = CFUNCTYPE(status_t, handle_p, c_int64, _p, c_int64, _p)


class Blas1V1(Structure):
    _fields_ = [('size', c_size_t),
                ('saxpy', _axpy), ('daxpy', _axpy), ('sscal', _scal), ('dscal', _scal),
                ('scopy', _copy), ('dcopy', _copy), ('sdot', _dot), ('ddot', _dot),
                ('snrm2', _nrm2), ('dnrm2', _nrm2)]
    _since_ = {}


class MemoryV1(Structure):
    _fields_ = [('size', c_size_t),
                ('alloc', CFUNCTYPE(status_t, handle_p, c_size_t, POINTER(c_void_p))),
                ('free_', CFUNCTYPE(status_t, handle_p, c_void_p)),
                ('copy_to_device', CFUNCTYPE(status_t, handle_p, _p, _p, c_size_t)),
                ('copy_to_host', CFUNCTYPE(status_t, handle_p, _p, _p, c_size_t)),
                ('memset_', CFUNCTYPE(status_t, handle_p, _p, c_int, c_size_t))]
    _since_ = {}


TABLE_KERNELS_V1 = b'hk.kernels/1'


class KernelAttributes(Structure):
    _fields_ = [('size', c_uint32), ('registers', c_int32), ('max_threads_per_block', c_int32),
                ('static_shared_bytes', c_int32), ('max_dynamic_shared_bytes', c_int32),
                ('const_bytes', c_int32), ('local_bytes', c_int32), ('ptx_version', c_int32),
                ('binary_version', c_int32)]


_u32 = c_uint32


class KernelsV1(Structure):
    _fields_ = [('size', c_size_t),
                ('load', CFUNCTYPE(status_t, handle_p, c_void_p, c_size_t, POINTER(c_void_p))),
                ('unload', CFUNCTYPE(status_t, handle_p, c_void_p)),
                ('get_kernel', CFUNCTYPE(status_t, handle_p, c_void_p, c_char_p,
                                         POINTER(c_void_p))),
                ('get_attributes', CFUNCTYPE(status_t, handle_p, c_void_p,
                                             POINTER(KernelAttributes))),
                ('launch', CFUNCTYPE(status_t, handle_p, c_void_p, _u32, _u32, _u32, _u32, _u32,
                                     _u32, _u32, POINTER(c_void_p))),
                ('get_function', CFUNCTYPE(status_t, handle_p, c_void_p, POINTER(c_void_p)))]
    _since_ = {}


class LoadReport(Structure):
    _fields_ = [('path', c_char_p), ('stage', c_int), ('status', status_t),
                ('reason', c_char_p), ('plugin', c_void_p)]


class LoaderOptions(Structure):
    _fields_ = [('size', c_uint32), ('default_dir', c_char_p), ('ignore_env', c_int),
                ('log', log_fn), ('log_user', c_void_p), ('abi_min', c_uint32),
                ('abi_max', c_uint32), ('probe_timeout_ms', c_uint32),
                ('isolation', c_uint32), ('probe_path', c_char_p),
                ('load_in_place', c_uint32),
                ('deadline_ms', c_uint32), ('verifier', c_uint32)]


def read_struct(cls, address, size=None):
    """A zeroed cls filled with min(size, sizeof(cls)) bytes from address, size
    being the struct's own first field (size_t) unless given."""
    out = cls()
    if not address:
        return out
    if size is None:
        size = c_size_t.from_address(address).value
    ctypes.memmove(ctypes.addressof(out), address, min(int(size), ctypes.sizeof(cls)))
    return out


def clear_newer(struct, minor):
    """Clears the slots of struct newer than the negotiated ABI minor."""
    for name, since in getattr(struct, '_since_', {}).items():
        if since > minor:
            field = getattr(type(struct), name)
            ctypes.memset(ctypes.addressof(struct) + field.offset, 0, field.size)
    return struct


# hk_swap.h: movable handles and live swap.
SWAP_PHASES = ('idle', 'pending', 'draining', 'closing')      # hk_swap_phase_t
MODULE_STATES = ('open', 'closed', 'still-mapped')            # hk_module_state_t


class MhandleState(Structure):
    _fields_ = [('size', c_uint32), ('plugin', c_void_p), ('generation', c_uint64),
                ('inflight', c_uint64)]


# hk_swap_verify_fn: (user, plugin, handle, why, why_len) -> status
SwapVerifyFn = ctypes.CFUNCTYPE(status_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_size_t)


class SwapOptions(Structure):
    _fields_ = [('size', c_uint32), ('from', c_char_p), ('hold_after_us', c_int64),
                ('hold_max_us', c_int64), ('deadline_us', c_int64), ('verify', SwapVerifyFn),
                ('verify_user', ctypes.c_void_p), ('keep_old', c_uint32)]


class MhandlePin(Structure):
    _fields_ = [('size', c_uint32), ('handle', ctypes.c_void_p), ('table', ctypes.c_void_p),
                ('plugin', ctypes.c_void_p), ('internal', ctypes.c_void_p * 2)]


class SwapState(Structure):
    _fields_ = [('size', c_uint32), ('phase', c_int)] + [
        (name, c_uint64) for name in ('handles', 'inflight', 'draining', 'libraries')]


class SwapPluginState(Structure):
    _fields_ = [('size', c_uint32), ('module', c_int)] + [
        (name, c_uint64) for name in ('handles', 'inflight', 'draining', 'closes', 'reopens')]


# hk_watch.h
WATCH_REPORT, WATCH_SWAP = 0, 1
WATCH_KINDS = ('unknown', 'loaded', 'swapped', 'not-taken', 'refused', 'directory')


class WatchEvent(Structure):
    _fields_ = [('size', c_uint32), ('kind', c_int), ('status', c_int),
                ('path', ctypes.c_char_p), ('plugin', ctypes.c_void_p),
                ('reason', ctypes.c_char_p), ('mtime_ns', c_int64), ('seen_ns', c_uint64),
                ('done_ns', c_uint64)]


# hk_watch_fn: (user, const hk_watch_event_t *) -> void
WatchFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(WatchEvent))


class WatchOptions(Structure):
    _fields_ = [('size', c_uint32), ('policy', c_uint32), ('request', ctypes.c_char_p),
                ('debounce_ms', c_uint32), ('on_event', WatchFn), ('user', ctypes.c_void_p),
                ('swap', ctypes.POINTER(SwapOptions))]
