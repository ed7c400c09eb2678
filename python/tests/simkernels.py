"""Test equipment: host emulations of the kernels of pykernels.cu for the
simulated driver, registered at run time through its simcuda_emu_register
(tests/simcuda/simcuda_emu.h), so that a launch through hk.kernels/1 runs
them with the real argument list. Each records what it was launched with."""
import ctypes
import struct
from ctypes import POINTER, Structure, c_char_p, c_int, c_uint, c_void_p

CUDA_SUCCESS, CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_UNKNOWN = 0, 700, 999
ARG_SIZES = (1, 2, 4, 8, 4, 8, 8)  # hkpy_args's arguments after out


class Launch(Structure):  # simcuda_launch_t
    _fields_ = [('kernel_name', c_char_p), ('grid', c_uint * 3), ('block', c_uint * 3),
                ('shared_bytes', c_uint), ('ctx', c_void_p), ('stream', c_void_p),
                ('device', c_int)]


EMU_FN = ctypes.CFUNCTYPE(c_int, POINTER(Launch), POINTER(c_void_p))


class Entry(Structure):  # simcuda_emu_entry_t
    _fields_ = [('name', c_char_p), ('fn', EMU_FN), ('nparams', c_uint),
                ('param_size', c_uint * 16), ('check', c_void_p), ('block', c_void_p)]


class Emulations:
    """Registers the emulations with the simulated driver at path; .launches
    lists (name, grid, block, shared bytes, stream, device) of each run, and
    .errors what an emulation raised (returned as CUDA_ERROR_UNKNOWN)."""

    def __init__(self, path):
        self.drv = ctypes.CDLL(path)
        self.drv.simcuda_emu_register.argtypes = [POINTER(Entry)]
        self.drv.simcuda_emu_check.argtypes = [POINTER(Launch), c_void_p, ctypes.c_size_t]
        self.launches, self.errors, self._keep = [], [], []
        for name in ('hkpy_axpy', 'hkpy_args', 'hkpy_reverse', 'hkpy_index'):
            fn = EMU_FN(self._wrap(name, getattr(self, '_' + name[5:])))
            self._keep.append(fn)  # the driver calls it for the life of the process
            e = Entry(name=name.encode(), fn=fn)
            assert self.drv.simcuda_emu_register(ctypes.byref(e)) == 0

    def _wrap(self, name, body):
        def run(launch, params):
            l = launch.contents
            self.launches.append((name, tuple(l.grid), tuple(l.block), l.shared_bytes,
                                  l.stream or 0, l.device))
            try:
                return body(launch, params)
            except Exception as e:  # the test sees it in .errors
                self.errors.append('%s: %r' % (name, e))
                return CUDA_ERROR_UNKNOWN
        return run

    def check(self, launch, ptr, nbytes):
        return self.drv.simcuda_emu_check(launch, ptr, nbytes)

    def _axpy(self, launch, params):
        n = ctypes.c_int64.from_address(params[0]).value
        a = ctypes.c_float.from_address(params[1]).value
        x = ctypes.c_void_p.from_address(params[2]).value
        y = ctypes.c_void_p.from_address(params[3]).value
        if n <= 0:
            return CUDA_SUCCESS  # the kernel reads no pointer
        for p in (x, y):
            r = self.check(launch, p, n * 4)
            if r != CUDA_SUCCESS:
                return r
        xs, ys = (ctypes.c_float * n).from_address(x), (ctypes.c_float * n).from_address(y)
        for i in range(n):
            ys[i] += a * xs[i]
        return CUDA_SUCCESS

    def _args(self, launch, params):
        out = ctypes.c_void_p.from_address(params[0]).value
        r = self.check(launch, out, sum(ARG_SIZES))
        if r != CUDA_SUCCESS:
            return r
        at = out
        for i, size in enumerate(ARG_SIZES, 1):
            ctypes.memmove(at, params[i], size)
            at += size
        return CUDA_SUCCESS

    def _reverse(self, launch, params):
        l = launch.contents
        n = l.block[0]
        if l.shared_bytes < n * 4:  # the kernel would run past its shared memory
            return CUDA_ERROR_ILLEGAL_ADDRESS
        x = ctypes.c_void_p.from_address(params[0]).value
        r = self.check(launch, x, l.grid[0] * n * 4)
        if r != CUDA_SUCCESS:
            return r
        xs = (ctypes.c_float * (l.grid[0] * n)).from_address(x)
        for b in range(l.grid[0]):
            xs[b * n:(b + 1) * n] = xs[b * n:(b + 1) * n][::-1]
        return CUDA_SUCCESS

    def _index(self, launch, params):
        l = launch.contents
        g, b = tuple(l.grid), tuple(l.block)
        out = ctypes.c_void_p.from_address(params[0]).value
        total = g[0] * g[1] * g[2] * b[0] * b[1] * b[2]
        r = self.check(launch, out, total * 4)
        if r != CUDA_SUCCESS:
            return r
        ctypes.memmove(out, index_values(g, b).tobytes(), total * 4)
        return CUDA_SUCCESS


def index_values(grid, block):
    """What hkpy_index writes for a grid and block, as a NumPy array."""
    import numpy as np
    per = block[0] * block[1] * block[2]
    out = np.zeros(grid[0] * grid[1] * grid[2] * per, dtype=np.uint32)
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                blk = (bz * grid[1] + by) * grid[0] + bx
                for t in range(per):
                    tx, ty, tz = t % block[0], t // block[0] % block[1], t // (block[0] * block[1])
                    out[blk * per + t] = ((bz * 16 + by) * 16 + bx) * 4096 + \
                        (tz * 64 + ty) * 64 + tx
    return out


def packed_args(i8, u16, i32, u64, f32, f64, pair):
    """The 35 bytes hkpy_args writes for these values."""
    return struct.pack('<bHiQfdif', i8, u16, i32, u64, f32, f64, *pair)
