"""Checks on every integer and string before it reaches C.

ctypes converts a Python int to a C integer by keeping its low bits and a
Python string to a char * that ends at its first NUL: device=2**32 would
become device 0, a stream of 2**64 the NULL stream, "hk-cpu\\0x" the name
"hk-cpu". Every value the package hands to C goes through one of these
first, and an out-of-range value is refused with ValueError (a value of the
wrong type with TypeError) naming it.
"""
import ctypes
import operator
import os

INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1
UINT32_MAX = 2 ** 32 - 1
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
PTRDIFF_MAX = 2 ** (8 * ctypes.sizeof(ctypes.c_ssize_t) - 1) - 1
ADDRESS_END = 2 ** (8 * ctypes.sizeof(ctypes.c_void_p))  # one past the highest address


def integer(value, what, lo, hi):
    """value as an int in [lo, hi]: TypeError for what is not an integer (a
    bool included: True is no device, stream or size), ValueError outside."""
    if isinstance(value, bool):
        raise TypeError('%s must be an integer, not a bool' % what)
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError('%s must be an integer, not %s' % (what, type(value).__name__)) from None
    if not lo <= v <= hi:
        raise ValueError('%s is %d, outside the range %d..%d that C takes'
                         % (what, v, lo, hi))
    return v


def int32(value, what):
    return integer(value, what, INT32_MIN, INT32_MAX)


def uint32(value, what):
    return integer(value, what, 0, UINT32_MAX)


def int64(value, what):
    return integer(value, what, INT64_MIN, INT64_MAX)


def address(value, what):
    """A pointer value: 0 .. the highest address."""
    return integer(value, what, 0, ADDRESS_END - 1)


def cstring(value, what, path=False):
    """value as the bytes of a C string. str (UTF-8; a path: the file system
    encoding) or bytes, and os.PathLike when path; ValueError when it holds a
    NUL, which would end the string early in C."""
    if path and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        b = os.fsencode(value) if path else value.encode('utf-8')
    elif isinstance(value, (bytes, bytearray)):
        b = bytes(value)
    else:
        raise TypeError('%s must be a str%s, not %s'
                        % (what, ' or a path' if path else '', type(value).__name__))
    if b'\0' in b:
        raise ValueError('%s %r contains a NUL character, where C would end it' % (what, value))
    return b
