#!/usr/bin/env python3
"""The previous ABI minor keeps working (docs/abi.md, "Versions").

A host and a plugin compiled from the headers of ABI 1.1 as released
(tests/abi/v1.1), never rebuilt, meet today's loader library, plugins and
programs:
- the old host (prev_host, linked with today's libhkloader.so) on today's
  hk-cpu, on today's hk-cuda over the simulated driver (where both are
  built) and on the old plugin: each opens at a minor no lower than the
  1.1 the host knows (abi_max 0 is the loader library's current minor:
  minors only add, so the host finds all it knows), and at exactly 1.1
  when the host asks for its own HK_ABI_CURRENT; its workload is right;
- today's hk-host runs its verified workload on the old plugin, which it
  reports as ABI 1.1.
The old plugin is loadable and usable, not a model of today's rules:
hk-validate holds every plugin, of any minor, to the rules made exact in
1.2, which the plugin of then does not all keep.
Ends with "N passed, N failed, N skipped".
"""
import json
import os
import subprocess
import sys
import unittest

HOST = os.environ['HK_PREV_HOST']
OLD_PLUGIN = os.environ['HK_PREV_PLUGIN']
CPU = os.environ['HK_CPU']
HK_HOST = os.environ['HK_HOST']
SIM = os.environ.get('HK_PREV_SIM')
CUDA = os.environ.get('HK_PREV_CUDA')
TIMEOUT = 300


def run(argv, **extra):
    env = dict(os.environ)
    env.pop('HK_PLUGIN_PATH', None)
    env.update(extra)
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env, timeout=TIMEOUT)


class PreviousMinor(unittest.TestCase):
    def test_old_host_on_todays_plugin_and_old_plugin(self):
        for pin, cpu_abi in (([], r'1\.[1-9][0-9]*'), (['-m'], r'1\.1')):
            r = run([HOST] + pin + [CPU, OLD_PLUGIN])
            self.assertEqual(r.returncode, 0, r.stdout)
            lines = r.stdout.splitlines()
            self.assertEqual(len(lines), 2, r.stdout)
            self.assertRegex(lines[0], r'^%s: hk-cpu \S+ abi %s: ok$' % (CPU, cpu_abi))
            self.assertEqual(lines[1], '%s: hk-prev 1.1.0 abi 1.1: ok' % OLD_PLUGIN)

    def test_todays_host_runs_old_plugin(self):
        r = run([HK_HOST, 'run', '-p', OLD_PLUGIN, '-n', '4099', '--json'])
        self.assertEqual(r.returncode, 0, r.stdout)
        doc = json.loads(r.stdout)
        self.assertEqual(doc['plugin']['name'], 'hk-prev')
        self.assertEqual(doc['plugin']['abi'], '1.1')
        self.assertGreater(doc['summary']['checks'], 0)
        self.assertEqual(doc['summary']['wrong_or_failed'], 0, r.stdout)

    @unittest.skipUnless(SIM and CUDA, 'hk-cuda or the simulated driver is not built')
    def test_old_host_on_todays_cuda_plugin(self):
        r = run([HOST, '-m', CUDA], HK_CUDA_DRIVER=SIM, SIMCUDA_DEVICES='2')
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertRegex(r.stdout, r'^%s: hk-cuda \S+ abi 1\.1: ok\n$' % CUDA)


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    skipped = len(result.skipped)
    print('%d passed, %d failed, %d skipped' % (result.testsRun - failed - skipped, failed,
                                                skipped))
    return 0 if failed == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
