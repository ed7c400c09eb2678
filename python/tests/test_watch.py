"""Hot reload from Python (handlekit.Watch over plugin_api/hk_watch.h): a
new build of hk-cpu written over the loaded file while threads compute goes
live by itself under the 'swap' policy, is only reported under 'report',
a build that computes wrong is refused and the old one keeps serving, a
host's own select loop drives it through fileno() and process(), and bad
arguments are refused with the documented exceptions."""
import os
import select
import shutil
import tempfile
import threading
import time
import unittest

try:
    import numpy as np
except ImportError:
    np = None

import handlekit as hk

PLUGINS = os.environ.get('HK_TEST_PLUGIN_DIR')
SWAP = os.environ.get('HK_TEST_SWAP_PLUGINS')
WAIT = 20.0  # seconds: a deadline far above any step, not a pause


def setUpModule():
    if not PLUGINS or not SWAP:
        raise unittest.SkipTest('HK_TEST_PLUGIN_DIR and HK_TEST_SWAP_PLUGINS are not set '
                                '(scons test sets them)')
    if np is None:
        raise unittest.SkipTest('NumPy is not installed')


def rewrite(src, dst):
    """The file at dst written again in place (truncated, then the bytes of
    src), as cp does."""
    with open(src, 'rb') as f:
        data = f.read()
    with open(dst, 'r+b') as f:
        f.truncate(0)
        f.write(data)


class Watch(unittest.TestCase):
    def setUp(self):
        root = os.environ.get('HK_TEST_TMP')
        if root:
            os.makedirs(root, mode=0o755, exist_ok=True)
        self.tmp = tempfile.mkdtemp(dir=root)
        self.path = os.path.join(self.tmp, 'hk-cpu.so')
        shutil.copy(os.path.join(PLUGINS, 'hk-cpu.so'), self.path)
        self.loader = hk.Loader(default_dir=self.tmp, ignore_env=True).scan()
        self.first = self.loader.select('hk-cpu@^1')
        self.stop = threading.Event()
        self.bad, self.calls = [], [0] * 4
        self.handles = [hk.MovableHandle(self.loader, 'hk-cpu@^1') for _ in range(4)]
        self.threads = [threading.Thread(target=self.work, args=(i, h))
                        for i, h in enumerate(self.handles)]
        for t in self.threads:
            t.start()

    def work(self, i, h):
        while not self.stop.is_set():
            self.calls[i] += 1
            x = np.arange(1, 65, dtype=np.float32)
            try:
                h.scal(2.0, x)
            except Exception as e:  # any failure, reported by tearDown
                self.bad.append('%s: %s' % (type(e).__name__, e))
                return
            if not np.array_equal(x, 2 * np.arange(1, 65, dtype=np.float32)):
                self.bad.append('wrong result')

    def tearDown(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        for h in self.handles:
            h.close()
        self.assertEqual(self.bad, [])
        self.assertTrue(all(self.calls), 'a thread made no call: %r' % (self.calls,))
        self.loader.close()
        shutil.rmtree(self.tmp)

    def test_swap_policy(self):
        seen = []
        with hk.Watch(self.loader, 'hk-cpu@^1', debounce_ms=100, on_event=seen.append) as w:
            w.start()
            rewrite(os.path.join(SWAP, 'hk-cpu-1.0.1.so'), self.path)
            e = w.next_event('swapped', timeout=WAIT)
            self.assertIsNotNone(e, 'no swap; events: %r' % (seen,))
            self.assertEqual(e.plugin.version, '1.0.1')
            self.assertEqual(e.status, hk.Status.OK)
            self.assertEqual(e.path, self.path)
            self.assertIn('moved to it', e.reason)
            self.assertTrue(all(h.plugin == e.plugin for h in self.handles))
            self.assertEqual(w.errors, [])
        self.assertIn(e, seen)

    def test_report_policy_and_a_wrong_build(self):
        with hk.Watch(self.loader, 'hk-cpu@^1', policy='report', debounce_ms=100) as w:
            w.start()
            rewrite(os.path.join(SWAP, 'swp_wrong.so'), self.path)
            e = w.next_event('refused', timeout=WAIT)
            self.assertIsNotNone(e)
            self.assertEqual(e.plugin.version, '1.0.2')
            self.assertIn('verification', e.reason)
            rewrite(os.path.join(SWAP, 'hk-cpu-1.0.1.so'), self.path)
            e = w.next_event('loaded', timeout=WAIT)
            self.assertIsNotNone(e)
            self.assertEqual(e.plugin.version, '1.0.1')
            self.assertTrue(all(h.plugin == self.first for h in self.handles))
            self.assertEqual(self.loader.swap('hk-cpu@^1').version, '1.0.1')

    def test_own_select_loop(self):
        with hk.Watch(self.loader, 'hk-cpu@^1', debounce_ms=100) as w:
            rewrite(os.path.join(SWAP, 'hk-cpu-1.0.1.so'), self.path)
            deadline, got = time.monotonic() + WAIT, None
            while got is None and time.monotonic() < deadline:
                ready, _, _ = select.select([w], [], [], 1.0)
                if ready:
                    w.process()
                got = w.next_event('swapped', timeout=0)
            self.assertIsNotNone(got)
            self.assertEqual(got.plugin.version, '1.0.1')
        with self.assertRaises(hk.HandlekitError) as cm:
            w.process()
        self.assertEqual(cm.exception.status, hk.Status.INVALID_HANDLE)

    def test_bad_arguments(self):
        with self.assertRaises(TypeError):
            hk.Watch('not a loader', 'hk-cpu')
        with self.assertRaises(ValueError):
            hk.Watch(self.loader, 'hk-cpu', policy='sometimes')
        with self.assertRaises(TypeError):
            hk.Watch(self.loader, 'hk-cpu', on_event=3)
        with self.assertRaises(hk.HandlekitError) as cm:
            hk.Watch(self.loader)  # 'swap' needs a request
        self.assertEqual(cm.exception.status, hk.Status.INVALID_VALUE)
        self.assertIn('needs a request', str(cm.exception))
        with self.assertRaises(hk.HandlekitError) as cm:
            hk.Watch(self.loader, 'hk-cpu@^^1')
        self.assertEqual(cm.exception.status, hk.Status.INVALID_VALUE)
        with self.assertRaises(hk.HandlekitError) as cm:
            hk.Watch(self.loader, 'hk-cpu', debounce_ms=60001)
        self.assertIn('a minute', str(cm.exception))
        w = hk.Watch(self.loader, 'hk-cpu')
        w.start()
        with self.assertRaises(hk.HandlekitError) as cm:
            w.start()
        self.assertEqual(cm.exception.status, hk.Status.BUSY)
        w.close()
        w.close()


if __name__ == '__main__':
    unittest.main()
