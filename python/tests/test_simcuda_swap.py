"""A movable handle on hk-cuda over the simulated driver, moved by a swap to
another build of hk-cuda (tests/swap) with its stream and pointer mode:
device arrays made before the swap stay usable and every result stays right,
and a kernel of pykernels.cu loaded through it launches right after it.
Runs when HK_TEST_SIMCUDA names the simulated driver."""
import ctypes
import os
import shutil
import tempfile
import unittest

try:
    import numpy as np
except ImportError:
    np = None

import handlekit as hk

SIM = os.environ.get('HK_TEST_SIMCUDA')
PLUGINS = os.environ.get('HK_TEST_PLUGIN_DIR')
SWAP = os.environ.get('HK_TEST_SWAP_PLUGINS')
_emulations = None


def setUpModule():
    if not SIM:
        raise unittest.SkipTest('HK_TEST_SIMCUDA is not set: no simulated driver for this run')
    if not PLUGINS or not SWAP:
        raise unittest.SkipTest('HK_TEST_PLUGIN_DIR and HK_TEST_SWAP_PLUGINS are not set')
    if np is None:
        raise unittest.SkipTest('NumPy is not installed')


class CudaSwap(unittest.TestCase):
    def setUp(self):
        from devarray import DeviceArray
        self.DA = DeviceArray
        root = os.environ.get('HK_TEST_TMP')
        if root:
            os.makedirs(root, mode=0o755, exist_ok=True)
        self.tmp = tempfile.mkdtemp(dir=root)
        shutil.copy(os.path.join(PLUGINS, 'hk-cuda.so'), self.tmp)
        shutil.copy(os.path.join(SWAP, 'hk-cuda-1.0.1.so'), self.tmp)
        self.loader = hk.Loader(default_dir=self.tmp, ignore_env=True).scan()
        self.new = self.loader.select('hk-cuda@1.0.1')
        self.old = [p for p in self.loader.plugins if p is not self.new][0]

    def tearDown(self):
        self.loader.close()
        shutil.rmtree(self.tmp)

    def stream(self):
        drv = ctypes.CDLL(SIM)
        ctx, s = ctypes.c_void_p(), ctypes.c_void_p()
        self.assertEqual(drv.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), 0)
        self.assertEqual(drv.cuCtxPushCurrent_v2(ctx), 0)
        self.assertEqual(drv.cuStreamCreate(ctypes.byref(s), 0), 0)
        self.assertEqual(drv.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p())), 0)
        return s.value

    def test_device_arrays_and_settings_follow_the_swap(self):
        with self.loader.mhandle(self.old, device=0) as m:
            self.assertEqual(m.memory, hk.CUDA)
            s = self.stream()
            m.stream = s
            m.pointer_mode = 'device'
            xh = np.arange(1, 17, dtype=np.float64)
            x, y = self.DA(m, xh), self.DA(m, np.ones(16))
            out, alpha = self.DA(m, np.zeros(1)), self.DA(m, np.array([0.5]))
            try:
                m.axpy(alpha, x, y)
                self.assertIs(self.loader.swap(self.new), self.new)
                self.assertIs(m.plugin, self.new)
                self.assertEqual((m.stream, m.pointer_mode), (s, 'device'))
                m.dot(x, y, out=out)  # arrays made through the old build
                self.assertEqual(out.numpy()[0], float(np.dot(xh, 0.5 * xh + 1)))
                m.pointer_mode = 'host'
                self.assertEqual(m.nrm2(x), float(np.linalg.norm(xh)))
            finally:
                for a in (x, y, out, alpha):
                    a.free()
        self.assertEqual(self.old.swap_state()['module'], 'closed')

    def test_kernels_follow_the_swap(self):
        from kernelcases import kernels_dir
        from simkernels import Emulations
        d = kernels_dir()
        if d is None:
            self.skipTest('the kernels of pykernels.cu are not built (no CUDA toolkit)')
        global _emulations
        _emulations = _emulations or Emulations(SIM)  # kept: the driver calls them
        with self.loader.mhandle(self.old, device=0) as m:
            with open(os.path.join(d, 'pykernels.fatbin'), 'rb') as f:
                lib = m.load_library(f.read())
            k = lib['hkpy_axpy']
            n = 8
            x, y = self.DA(m, np.arange(n, dtype=np.float32)), self.DA(m, np.ones(n, np.float32))
            try:
                k(1, n, (np.int64(n), np.float32(1), x, y))
                self.assertIs(self.loader.swap(self.new), self.new)
                k(1, n, (np.int64(n), np.float32(1), x, y))  # the same kernel, the new build
                np.testing.assert_array_equal(y.numpy(), 1 + 2 * np.arange(n, dtype=np.float32))
                lib.unload()
            finally:
                for a in (x, y):
                    a.free()
        self.assertEqual(self.old.swap_state()['module'], 'closed')
