"""What every module of the package uses: the error, status and text
conversions, stream addresses, and the reading of optional loader functions
and of state structs. It imports no module of the package but _abi and
_limits, so that every other module can import it."""
from ctypes import c_void_p

from . import _abi, _limits


class HandlekitError(Exception):
    """A handlekit call failed. .status is the Status (an IntEnum: .name and the
    number; a plain int for a status newer than this package), .reason the
    line the plugin or the loader left about it (a request the loader cannot
    resolve adds a line for each candidate of that name it refused)."""

    def __init__(self, status, reason=''):
        status = to_status(status)
        self.status = status
        self.reason = reason or ''
        name = status.name if isinstance(status, _abi.Status) else 'UNKNOWN'
        text = self.reason or _abi.STATUS_MESSAGES.get(int(status), 'unknown status')
        super().__init__('%s (%d): %s' % (name, int(status), text))


def to_status(value):
    """value as a Status, or as an int when this package does not know it."""
    try:
        return _abi.Status(value)
    except ValueError:
        return int(value)


def _text(b):
    return b.decode('utf-8', 'replace') if b else ''


def stream_address(stream):
    """A CUstream as an int from None, an int, a ctypes pointer, or an object
    with __cuda_stream__ (CUDA Python), .cuda_stream (PyTorch), .ptr (CuPy) or
    .handle (Numba)."""
    if stream is None:
        return 0
    if hasattr(stream, '__cuda_stream__'):
        return _limits.address(stream.__cuda_stream__()[1], 'the stream')
    for attr in ('cuda_stream', 'ptr', 'handle'):
        if hasattr(stream, attr):
            stream = getattr(stream, attr)
            break
    if isinstance(stream, c_void_p):
        return stream.value or 0
    try:
        return _limits.address(stream, 'the stream')
    except TypeError:
        raise TypeError('a stream is None, an int (CUstream) or an object with __cuda_stream__, '
                        '.cuda_stream or .ptr; not %s' % type(stream).__name__) from None


def _need(L, name):
    if not hasattr(L, name):
        raise HandlekitError(_abi.Status.NOT_SUPPORTED, 'the loader library has no %s: movable '
                             'handles and swap need a loader of ABI 1.2' % name)
    return getattr(L, name)


def _fields(struct, skip=('size',)):
    return {name: getattr(struct, name) for name, _ in struct._fields_ if name not in skip}


def _name(names, value):
    return names[value] if 0 <= value < len(names) else 'unknown'
