"""Movable handles and live swap from Python (plugin_api/hk_swap.h), on
hk-cpu and builds of it with other versions (tests/swap): ops through a
movable handle, swaps that move it with its settings, a refused swap, a
prepared swap, a swap of the handles of one plugin name, threads calling
through swaps, and the module lifetime rules: a plugin Handle holds its
module open, a closed module refuses new handles and opens again when a swap
returns to it, a loader with live handles is not destroyed. A prepared swap
that is dropped, or left at the interpreter's exit, is cancelled: those
scenarios run in a process of their own with a time limit, as a swap left
pending makes every later create, destroy and swap of the loader wait.

Every test has a loader of its own over fresh copies of the plugin files, so
that no module is shared with the package's default loader."""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
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
        st, stats = self.loader.swap_state(), self.loader.swap_stats()
        self.assertEqual((st['phase'], stats['swaps'], stats['refused'], st['handles']),
                         ('idle', 1, 0, 0))
        # Nothing used the old module any more: the swap closed it.
        self.assertEqual(self.old.swap_state()['module'], 'closed')

    def test_pin_reaches_a_table_across_a_swap(self):
        """A pin gives the implementation's own handle and table; a swap from
        inside it is refused BUSY; after it, the next pin gets the new one."""
        with self.loader.mhandle('hk-cpu@1.0.0') as m:
            y = np.ones(8, dtype=np.float32)
            with m.pin('hk.blas1/1') as p:
                self.assertIs(p.plugin, self.old)
                blas = p.table_as(hk._abi.Blas1V1)
                alpha = ctypes.c_float(2.0)
                st = blas.saxpy(p.handle, 8, ctypes.byref(alpha), self.x.ctypes.data,
                                1, y.ctypes.data, 1)
                self.assertEqual(st, hk._abi.Status.OK)
                # A pin is a call in flight: a swap on this thread would wait for it.
                with self.assertRaises(hk.HandlekitError) as e:
                    self.loader.swap('hk-cpu@1.0.1')
                self.assertEqual(e.exception.status, hk._abi.Status.BUSY)
            to = self.loader.swap('hk-cpu@1.0.1')
            np.testing.assert_array_equal(y, 2 * self.x + 1)
            with m.pin('hk.blas1/1') as p:
                self.assertIs(p.plugin, to)
            with self.assertRaises(hk.HandlekitError) as e:
                m.pin('no.such/1')
            self.assertEqual(e.exception.status, hk._abi.Status.NOT_FOUND)
            self.assertIn('offers no table no.such/1', e.exception.reason)

    def test_swap_verify_callback(self):
        """The host's own verification: raising refuses the swap with the
        exception's text; returning lets it through; not callable: TypeError."""
        seen = []

        def refuse(plugin, handle):
            seen.append((plugin, handle))
            raise ValueError('the host does not like this build')

        with self.loader.mhandle('hk-cpu@1.0.0') as m:
            with self.assertRaises(hk.HandlekitError) as e:
                self.loader.swap('hk-cpu@1.0.1', verify=refuse)
            self.assertEqual(e.exception.status, hk._abi.Status.INTERNAL)
            self.assertIn("failed verification (the host's verify callback): the host does "
                          "not like this build", e.exception.reason)
            self.assertIs(m.plugin, self.old)
            self.assertEqual(len(seen), 1)
            self.assertTrue(seen[0][0] and seen[0][1])
            to = self.loader.swap('hk-cpu@1.0.1', verify=lambda plugin, handle: None)
            self.assertIs(m.plugin, to)
            with self.assertRaises(TypeError):
                self.loader.swap('hk-cpu@1.0.0', verify=123)

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

    def test_keep_old(self):
        with self.loader.mhandle('hk-cpu@1.0.0') as m:
            self.loader.swap('hk-cpu@1.0.1', keep_old=True)
            self.assertEqual(self.old.swap_state()['module'], 'open')
            self.assertEqual(self.old.swap_state()['closes'], 0)
            self.loader.swap('hk-cpu@1.0.0')  # back: nothing to open again
            self.assertEqual(self.old.swap_state()['reopens'], 0)
            self.assertEqual(m.plugin.version, '1.0.0')
            self.check_ops(m)

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
        self.assertEqual(self.loader.swap_stats()['refused'], 1)

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
        # The statistics by the library's own names, every one it knows.
        stats = self.loader.swap_stats()
        self.assertEqual(len(stats), 19)
        self.assertEqual(list(stats)[:4], ['swaps', 'refused', 'modules_closed',
                                           'last_switch_ns'])
        self.assertEqual(list(stats)[-1], 'last_destroy_status')
        self.assertTrue(all(isinstance(v, int) and v >= 0 for v in stats.values()))
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


# A scenario that leaves a swap pending hangs its process: this bounds it.
SCENARIO_TIMEOUT_S = 20


class DroppedPreparedSwap(unittest.TestCase):
    """A PreparedSwap that nobody commits or cancels, in a process of its own."""

    def setUp(self):
        root = os.environ.get('HK_TEST_TMP')
        if root:
            os.makedirs(root, mode=0o755, exist_ok=True)
        self.tmp = tempfile.mkdtemp(dir=root)
        shutil.copy(os.path.join(PLUGINS, 'hk-cpu.so'), self.tmp)
        shutil.copy(os.path.join(SWAP, 'hk-cpu-1.0.1.so'), self.tmp)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_scenario(self, body):
        """Runs body after a prelude that makes loader (over self.tmp), in a
        new interpreter; returns its stdout. Fails when it does not exit in
        SCENARIO_TIMEOUT_S with status 0."""
        prelude = textwrap.dedent('''\
            import gc, sys, threading
            sys.path.insert(0, %r)
            import handlekit as hk
            loader = hk.Loader(default_dir=%r, ignore_env=True).scan()
            ''') % (os.path.dirname(os.path.dirname(hk.__file__)), self.tmp)
        try:
            p = subprocess.run([sys.executable, '-c', prelude + textwrap.dedent(body)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=SCENARIO_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            self.fail('the scenario hung (killed after %d s); its output: %r %r'
                      % (SCENARIO_TIMEOUT_S, e.stdout, e.stderr))
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_dropped_prepared_swap_is_cancelled(self):
        out = self.run_scenario('''
            m = loader.mhandle('hk-cpu@1.0.0')
            p = loader.swap_prepare('hk-cpu@1.0.1')
            del p
            with loader.mhandle('hk-cpu@1.0.0') as other:  # waited forever before
                pass
            print(m.plugin.version, loader.swap_state()['phase'])
            print(loader.swap('hk-cpu@1.0.1').version)
            m.close()
            loader.close()
            ''')
        self.assertEqual(out.split(), ['1.0.0', 'idle', '1.0.1'])

    def test_collected_prepared_swap_is_cancelled(self):
        # In a reference cycle, only the garbage collector drops it.
        out = self.run_scenario('''
            m = loader.mhandle('hk-cpu@1.0.0')
            p = loader.swap_prepare('hk-cpu@1.0.1')
            p.cycle = p
            del p
            gc.collect()
            print(loader.swap('hk-cpu@1.0.1').version)
            m.close()
            loader.close()
            ''')
        self.assertEqual(out.split(), ['1.0.1'])

    def test_cancelled_or_committed_swap_is_not_cancelled_again(self):
        out = self.run_scenario('''
            m = loader.mhandle('hk-cpu@1.0.0')
            p = loader.swap_prepare('hk-cpu@1.0.1')
            p.cancel()
            del p
            gc.collect()
            with loader.swap_prepare('hk-cpu@1.0.1') as p:
                p.commit()
            del p
            gc.collect()
            print(m.plugin.version, loader.swap('hk-cpu@1.0.0').version)
            m.close()
            loader.close()
            ''')
        self.assertEqual(out.split(), ['1.0.1', '1.0.0'])

    def test_prepared_swap_keeps_its_loader(self):
        # The prepared swap holds the only reference to its loader: the
        # loader is destroyed after the cancel, not before.
        out = self.run_scenario('''
            p = loader.swap_prepare('hk-cpu@1.0.1')
            del loader
            del p
            gc.collect()
            print('done')
            ''')
        self.assertEqual(out.split(), ['done'])

    def test_prepared_swap_left_at_exit(self):
        out = self.run_scenario('''
            m = loader.mhandle('hk-cpu@1.0.0')
            p = loader.swap_prepare('hk-cpu@1.0.1')
            print('exiting')
            ''')
        self.assertEqual(out.split(), ['exiting'])

    def test_prepared_swap_dropped_on_another_thread(self):
        # The last reference goes on a thread that did not prepare it: the
        # cancel, which only the preparing thread may make, waits for that
        # thread's next create, destroy or swap on the loader.
        out = self.run_scenario('''
            m = loader.mhandle('hk-cpu@1.0.0')
            box = [loader.swap_prepare('hk-cpu@1.0.1')]
            t = threading.Thread(target=box.clear)
            t.start()
            t.join()
            with loader.mhandle('hk-cpu@1.0.0') as other:
                pass
            print(loader.swap('hk-cpu@1.0.1').version)
            m.close()
            loader.close()
            ''')
        self.assertEqual(out.split(), ['1.0.1'])

    def test_prepared_swap_of_a_running_thread_left_at_exit(self):
        # Only the preparing thread may cancel, and it never returns: the exit
        # leaves the loader's movable handles rather than wait for it.
        out = self.run_scenario('''
            m = loader.mhandle('hk-cpu@1.0.0')
            prepared, never = threading.Event(), threading.Event()

            def prepare_and_block():
                p = loader.swap_prepare('hk-cpu@1.0.1')
                prepared.set()
                never.wait()
            threading.Thread(target=prepare_and_block, daemon=True).start()
            prepared.wait()
            print('exiting')
            ''')
        self.assertEqual(out.split(), ['exiting'])
