"""hk.kernels/1 from Python on hk-cuda over the simulated driver: the cases
of kernelcases.py, with the kernels of pykernels.cu run by host emulations
that the test registers with the simulated driver (simkernels.py), plus what
only the simulation can show safely: the launch each call made, a launch
the kernel refuses, the producer's stream of an argument, and what a CPU
plugin and a closed handle do. Runs when HK_TEST_SIMCUDA names the simulated
driver."""
import ctypes
import os
import unittest

try:
    import numpy as np
except ImportError:
    np = None

import handlekit as hk
from handlekit import _cuda

SIM = os.environ.get('HK_TEST_SIMCUDA')
_emulations = None


def setUpModule():
    global _emulations
    if not SIM:
        raise unittest.SkipTest('HK_TEST_SIMCUDA is not set: no simulated driver for this run')
    if np is None:
        raise unittest.SkipTest('NumPy is not installed')
    from simkernels import Emulations
    _emulations = Emulations(SIM)


def _cases():
    from kernelcases import KernelCases
    return KernelCases


class SimKernels(_cases() if np is not None else object, unittest.TestCase):
    def setUp(self):
        from devarray import DeviceArray
        self.DA = DeviceArray
        self.h = hk.load('hk-cuda').handle(device=0)
        self.made = []
        self.emu = _emulations
        self.first, self.first_error = len(self.emu.launches), len(self.emu.errors)

    def tearDown(self):
        for a in self.made:
            a.free()
        self.h.close()
        self.assertEqual(self.emu.errors[self.first_error:], [])

    def dev(self, host, **kw):
        a = self.DA(self.h, host, **kw)
        self.made.append(a)
        return a

    def host(self, a):
        return a.numpy()

    def stream(self):
        drv = ctypes.CDLL(SIM)
        ctx, s = ctypes.c_void_p(), ctypes.c_void_p()
        self.assertEqual(drv.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), 0)
        self.assertEqual(drv.cuCtxPushCurrent_v2(ctx), 0)
        self.assertEqual(drv.cuStreamCreate(ctypes.byref(s), 0), 0)
        self.assertEqual(drv.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p())), 0)
        return s.value, s.value

    def launches(self):
        return self.emu.launches[self.first:]

    def test_launch_as_given(self):
        s, addr = self.stream()
        with self.load('ptx') as lib:
            out = self.dev(np.zeros(2 * 3 * 4 * 5 * 6, dtype=np.uint32))
            lib['hkpy_index']((2, 3), (4, 5, 6), (out,), shared_mem=12, stream=s)
        self.assertEqual(self.launches(), [('hkpy_index', (2, 3, 1), (4, 5, 6), 12, addr, 0)])

    def test_refused_arguments_launch_nothing(self):
        with self.load() as lib:
            y = self.dev(np.ones(4, dtype=np.float32))
            for args in ((4, np.float32(1), y, y), (np.int64(4), np.float32(1), y, 'y')):
                with self.assertRaises(TypeError):
                    lib['hkpy_axpy'](1, 4, args)
            with self.assertRaises(ValueError):
                lib['hkpy_axpy'](2 ** 32, 4, (np.int64(4), np.float32(1), y, y))
        self.assertEqual(self.launches(), [])

    def test_kernel_fault_is_a_status(self):
        with self.load() as lib:
            x = self.dev(np.arange(64, dtype=np.float32))
            with self.assertRaises(hk.HandlekitError) as cm:  # shared memory too small
                lib['hkpy_reverse'](1, 64, (x,), shared_mem=16)
            self.assertIs(cm.exception.status, hk.Status.LAUNCH_FAILED)
            self.assertIn('ILLEGAL_ADDRESS', cm.exception.reason)

    def test_arguments_of_every_array_kind(self):
        with self.load() as lib:
            x = np.arange(8, dtype=np.float32)
            dx, dy = self.dev(x), self.dev(np.zeros(8, dtype=np.float32), dlpack=True)
            lib['hkpy_axpy'](1, 8, (np.int64(8), np.float32(2), dx, dy))
            np.testing.assert_array_equal(self.host(dy), 2 * x)
            with self.assertRaisesRegex(TypeError, 'host array'):
                lib['hkpy_axpy'](1, 8, (np.int64(8), np.float32(2), x, dy))
            wild = type('Wild', (), {'__cuda_array_interface__': dict(
                dx.__cuda_array_interface__, data=(2 ** 64, False))})()
            with self.assertRaisesRegex(ValueError, 'data address'):
                lib['hkpy_axpy'](1, 8, (np.int64(8), np.float32(2), wild, dy))
            lib['hkpy_axpy'](1, 1, (np.int64(0), np.float32(2), None, None))  # NULL pointers

    def test_producer_stream_waited_for(self):
        calls, real = [], _cuda.stream_synchronize

        def spy(stream, what):
            calls.append((stream, what))
            real(stream, what)
        _cuda.stream_synchronize = spy
        try:
            s, addr = self.stream()
            with self.load() as lib:
                x = self.dev(np.ones(4, dtype=np.float32), stream=addr)
                y = self.dev(np.ones(4, dtype=np.float32))
                lib['hkpy_axpy'](1, 4, (np.int64(4), np.float32(1), x, y))
                self.assertEqual(calls, [(addr, 'args[2]')])
                lib['hkpy_axpy'](1, 4, (np.int64(4), np.float32(1), x, y), stream=s)
                self.assertEqual(len(calls), 1)  # the same stream: ordered already
        finally:
            _cuda.stream_synchronize = real

    def test_handle_close_unloads_its_libraries(self):
        h = hk.load('hk-cuda').handle(device=0)
        with open(self.image('fatbin'), 'rb') as f:
            lib = h.load_library(f.read())
        k = lib['hkpy_axpy']
        h.close()
        self.assertFalse(lib.loaded)
        with self.assertRaises(hk.HandlekitError):
            k(1, 1, ())

    def test_cpu_plugin_has_no_kernels(self):
        with hk.load('hk-cpu').handle() as h:
            with self.assertRaises(hk.HandlekitError) as cm:
                h.load_library(b'.version 8.0\n')
            self.assertIs(cm.exception.status, hk.Status.NOT_SUPPORTED)
            self.assertIn('hk.kernels/1', cm.exception.reason)
