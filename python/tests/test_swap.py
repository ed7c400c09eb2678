"""Movable handles and live swap from Python (plugin_api/hk_swap.h), on
hk-cpu and builds of it with other versions (tests/swap): ops through a
movable handle, swaps that move it with its settings, a refused swap, a
prepared swap, a swap of the handles of one plugin name, threads calling
through swaps, and the module lifetime rules: a plugin Handle holds its
module open, a closed module refuses new handles and opens again when a swap
returns to it, a loader with live handles is not destroyed.

Every test has a loader of its own over fresh copies of the plugin files, so
that no module is shared with the package's default loader."""
import os
import shutil
import tempfile
import threading
import unittest

try:
    import numpy as np
except ImportError:
    np = None

import handlekit as hk
from handlekit import _swap

PLUGINS = os.environ.get('HK_TEST_PLUGIN_DIR')
SWAP = os.environ.get('HK_TEST_SWAP_PLUGINS')


def setUpModule():
    if not PLUGINS or not SWAP:
        raise unittest.SkipTest('HK_TEST_PLUGIN_DIR and HK_TEST_SWAP_PLUGINS are not set '
                                '(scons test sets them)')
    if np is None:
        raise unittest.SkipTest('NumPy is not installed')


class Swap(unittest.TestCase):
    def setUp(self):
        root = os.environ.get('HK_TEST_TMP')
        if root:
            os.makedirs(root, mode=0o755, exist_ok=True)
        self.tmp = tempfile.mkdtemp(dir=root)
        os.makedirs(os.path.join(self.tmp, 'extra'))
        shutil.copy(os.path.join(PLUGINS, 'hk-cpu.so'), self.tmp)
        for name in ('hk-cpu-1.0.1.so', 'swp_twin.so'):
            shutil.copy(os.path.join(SWAP, name), self.tmp)
        self.wrong = os.path.join(self.tmp, 'extra', 'swp_wrong.so')
        shutil.copy(os.path.join(SWAP, 'swp_wrong.so'), self.wrong)
        self.loader = hk.Loader(default_dir=self.tmp, ignore_env=True).scan()
        self.old = self.loader.select('hk-cpu@1.0.0')
        self.assertEqual(self.old.version, '1.0.0')
        self.x = np.arange(1, 9, dtype=np.float32)

    def tearDown(self):
        self.loader.close()  # BUSY, and so a failure, if a test left a handle
        shutil.rmtree(self.tmp)

    def check_ops(self, h):
        y = np.ones(8, dtype=np.float32)
        h.axpy(2.0, self.x, y)
        np.testing.assert_array_equal(y, 2 * self.x + 1)
        self.assertEqual(h.dot(self.x, self.x[::-1]), float(np.dot(self.x, self.x[::-1])))

    def test_mhandle_moves_with_its_settings(self):
        with self.loader.mhandle('hk-cpu@1.0.0') as m:
            self.assertIsInstance(m, hk.MovableHandle)
            self.assertIs(m.plugin, self.old)
            self.assertEqual(m.memory, hk.HOST)
            self.check_ops(m)
            m.pointer_mode = 'device'
            to = self.loader.swap('hk-cpu@1.0.1')
            self.assertEqual((to.name, to.version), ('hk-cpu', '1.0.1'))
            self.assertIs(m.plugin, to)
            self.assertEqual(m.state()['generation'], 1)
            self.assertEqual(m.pointer_mode, 'device')
            out = np.zeros(1, dtype=np.float32)
            m.nrm2(self.x, out=out)
            self.assertAlmostEqual(out[0], float(np.linalg.norm(self.x)), places=5)
            m.pointer_mode = 'host'
            self.check_ops(m)
            self.assertTrue(m.table('hk.memory/1', hk._abi.MemoryV1).alloc)  # forwarded
            # forwarded too, but hk-cpu has no kernels: the loader says so
            self.assertTrue(m.table('hk.kernels/1', hk._abi.KernelsV1).load)
            with self.assertRaises(hk.HandlekitError) as e:
                m.load_library(b'.version 8.0\n')
            self.assertEqual(e.exception.status, hk._abi.Status.NOT_SUPPORTED)
            self.assertIn('does not offer this slot', e.exception.reason)
        st = self.loader.swap_state()
        self.assertEqual((st['phase'], st['generation'], st['failed'], st['handles']),
                         ('idle', 1, 0, 0))
        # Nothing used the old module any more: the swap closed it.
        self.assertEqual(self.old.swap_state()['module'], 'closed')

    def test_plugin_handle_keeps_its_module_open(self):
        h = self.old.handle()
        m = self.loader.mhandle('hk-cpu@1.0.0')
        self.loader.swap('hk-cpu@1.0.1')
        self.assertEqual(self.old.swap_state()['module'], 'open')
        self.check_ops(h)  # the module h runs is still there
        h.close()
        self.loader.swap('hk-cpu@1.0.0')
        self.loader.swap('hk-cpu@1.0.1')
        self.assertEqual(self.old.swap_state()['module'], 'closed')
        m.close()

    def test_closed_module_refuses_then_reopens(self):
        with self.loader.mhandle('hk-cpu@1.0.0') as m:
            self.loader.swap('hk-cpu@1.0.1')
            self.assertEqual(self.old.swap_state()['module'], 'closed')
            with self.assertRaises(hk.HandlekitError) as cm:
                self.old.handle()
            self.assertIs(cm.exception.status, hk.Status.NOT_SUPPORTED)
            self.assertIn('closed', cm.exception.reason)
            self.assertEqual(self.old.tables, [])
            self.loader.swap('hk-cpu@1.0.0')  # opens the same file again
            self.assertEqual(self.old.swap_state()['reopens'], 1)
            with self.old.handle() as h:
                self.check_ops(h)
            self.check_ops(m)

    def test_wrong_results_refuse_the_swap(self):
        with self.loader.mhandle('hk-cpu') as m:
            with self.assertRaises(hk.HandlekitError) as cm:
                self.loader.swap(self.wrong)
            self.assertIs(cm.exception.status, hk.Status.LOAD_FAILED)
            self.assertTrue(cm.exception.reason.startswith('swap to '), cm.exception.reason)
            self.assertEqual(m.plugin.version, '1.0.1')
            self.check_ops(m)
        self.assertEqual(self.loader.swap_state()['failed'], 1)

    def test_prepared_swap(self):
        with self.loader.mhandle('hk-cpu@1.0.0') as m:
            p = self.loader.swap_prepare('hk-cpu@1.0.1')
            self.assertTrue(p.pending)
            self.check_ops(m)
            self.assertEqual(m.plugin.version, '1.0.0')
            p.cancel()
            self.assertEqual(m.plugin.version, '1.0.0')
            with self.assertRaises(hk.HandlekitError):
                p.commit()
            with self.loader.swap_prepare('hk-cpu@1.0.1'):
                pass  # left without a commit: cancelled
            self.assertEqual(m.plugin.version, '1.0.0')
            with self.loader.swap_prepare('hk-cpu@1.0.1') as p:
                self.assertEqual(p.commit().version, '1.0.1')
            self.assertEqual(m.plugin.version, '1.0.1')
            self.check_ops(m)

    def test_prepared_swap_commits_only_from_its_thread(self):
        with self.loader.mhandle('hk-cpu@1.0.0') as m:
            with self.loader.swap_prepare('hk-cpu@1.0.1') as p:
                errors = []

                def other():
                    try:
                        p.commit()
                    except hk.HandlekitError as e:
                        errors.append(e.status)
                t = threading.Thread(target=other)
                t.start()
                t.join()
                self.assertEqual(errors, [hk.Status.INVALID_VALUE])
                self.assertTrue(p.pending)
            self.assertEqual(m.plugin.version, '1.0.0')

    def test_swap_of_one_plugin_name(self):
        with self.loader.mhandle('hk-cpu@1.0.0') as a, self.loader.mhandle('hk-cpu-twin') as b:
            self.loader.swap('hk-cpu@1.0.1', from_name='hk-cpu')
            self.assertEqual(a.plugin.version, '1.0.1')
            self.assertEqual((b.plugin.name, b.plugin.version), ('hk-cpu-twin', '2.0.0'))

    def test_threads_call_through_swaps(self):
        want = float(np.dot(self.x, self.x))
        m = self.loader.mhandle('hk-cpu@1.0.0')
        stop, errors, counts = threading.Event(), [], []

        def work():
            n = 0
            try:
                while not stop.is_set():
                    if m.dot(self.x, self.x) != want:
                        errors.append('wrong result')
                    n += 1
            except Exception as e:  # reported below
                errors.append(repr(e))
            counts.append(n)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            for i in range(10):
                self.loader.swap('hk-cpu@1.0.%d' % ((i + 1) % 2))
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(counts), 4)
        self.assertEqual(m.state()['generation'], 10)
        m.close()

    def test_loader_with_live_handles_is_not_destroyed(self):
        m = self.loader.mhandle('hk-cpu')
        h = self.old.handle()
        for live in (m, h):
            with self.assertRaises(hk.HandlekitError) as cm:
                self.loader.close()
            self.assertIs(cm.exception.status, hk.Status.BUSY)
            live.close()
        other = hk.Loader(default_dir=self.tmp, ignore_env=True).scan()
        other.close()
        with self.assertRaises(hk.HandlekitError) as cm:
            other.find('hk-cpu')
        self.assertIs(cm.exception.status, hk.Status.INVALID_HANDLE)

    def test_names_and_refusals(self):
        self.assertEqual(_swap.phase_names(self.loader),
                         (list(hk._abi.SWAP_PHASES), list(hk._abi.MODULE_STATES)))
        with self.assertRaises(hk.HandlekitError) as cm:
            self.loader.mhandle('no-such-plugin')
        self.assertIs(cm.exception.status, hk.Status.NOT_FOUND)
        with self.assertRaisesRegex(ValueError, 'NUL'):
            self.loader.mhandle('hk-cpu\0x')
        with self.assertRaisesRegex(ValueError, 'NUL'):
            self.loader.swap('hk-cpu\0x')
        with self.assertRaisesRegex(ValueError, 'NUL'):
            self.loader.swap('hk-cpu', from_name='hk-cpu\0')
        with self.assertRaisesRegex(ValueError, 'hold_after_us'):
            self.loader.swap('hk-cpu', hold_after_us=2 ** 63)
        with self.assertRaisesRegex(ValueError, 'device'):
            self.loader.mhandle('hk-cpu', device=2 ** 32)
        with self.loader.mhandle(self.old) as m:  # a Plugin of this loader
            self.assertIs(m.plugin, self.old)
            self.assertEqual(self.loader.swap(self.old).version, '1.0.0')
