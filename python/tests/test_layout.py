"""The ctypes mirrors in handlekit._abi against the C headers: every size,
offset, constant and status as a program compiled from plugin_api/ prints them
(HK_TEST_LAYOUT names that program)."""
import ctypes
import os
import subprocess
import unittest

from handlekit import _abi

STRUCTS = {
    'hk_struct_header_t': _abi.StructHeader,
    'hk_negotiate_request_t': _abi.NegotiateRequest,
    'hk_negotiate_answer_t': _abi.NegotiateAnswer,
    'hk_create_info_t': _abi.CreateInfo,
    'hk_handle_info_t': _abi.HandleInfo,
    'hk_vtable_t': _abi.Vtable,
    'hk_blas1_v1_t': _abi.Blas1V1,
    'hk_memory_v1_t': _abi.MemoryV1,
    'hk_load_report_t': _abi.LoadReport,
    'hk_loader_options_t': _abi.LoaderOptions,
    'hk_kernel_attributes_t': _abi.KernelAttributes,
    'hk_kernels_v1_t': _abi.KernelsV1,
    'hk_mhandle_state_t': _abi.MhandleState,
    'hk_mhandle_pin_t': _abi.MhandlePin,
    'hk_swap_options_t': _abi.SwapOptions,
    'hk_swap_state_t': _abi.SwapState,
    'hk_swap_plugin_state_t': _abi.SwapPluginState,
}


def c_layout():
    prog = os.environ.get('HK_TEST_LAYOUT')
    if not prog:
        raise unittest.SkipTest('HK_TEST_LAYOUT is not set (scons test sets it)')
    sizes, offsets, consts, statuses = {}, {}, {}, []
    for line in subprocess.run([prog], stdout=subprocess.PIPE, text=True,
                               check=True).stdout.splitlines():
        kind, rest = line.split(' ', 1)
        if kind == 'size':
            name, n = rest.split()
            sizes[name] = int(n)
        elif kind == 'offset':
            name, field, n = rest.split()
            offsets.setdefault(name, {})[field] = int(n)
        elif kind == 'const':
            name, n = rest.split()
            consts[name] = int(n)
        elif kind == 'status':
            name, n, msg = rest.split(' ', 2)
            statuses.append((name, int(n), msg))
    return sizes, offsets, consts, statuses


# Function tables: their slot lists grow at the end, and the package reads a
# table through a copy the loader clamps to the mirror's size, so a mirror may
# stop before the C list's last slots; it may not skip or move one.
TABLES = ('hk_blas1_v1_t', 'hk_memory_v1_t')


def check_struct(name, cls, c_size, c_offsets, c_minor):
    """Problems of cls against the C layout, as lines ([] when it mirrors it)."""
    problems = []
    py = {f[0]: getattr(cls, f[0]) for f in cls._fields_}
    since = getattr(cls, '_since_', {})
    tail = ctypes.sizeof(cls) if name in TABLES else None  # where a table's mirror may stop
    for field, off in c_offsets.items():
        if field not in py and tail is not None and off >= tail:
            continue  # a slot after the mirror's last: not read through the mirror
        if field not in py:
            problems.append('%s.%s: in C at %d, not in the Python mirror' % (name, field, off))
        elif py[field].offset != off:
            problems.append('%s.%s: offset %d in C, %d in Python'
                            % (name, field, off, py[field].offset))
    missing = [f for f in py if f not in c_offsets]
    for field in missing:
        if since.get(field, 0) <= c_minor:
            problems.append('%s.%s: in the Python mirror, not in C (ABI minor %d)'
                            % (name, field, c_minor))
    # The C struct ends where the first field it does not have yet begins.
    want = min(py[f].offset for f in missing) if missing else ctypes.sizeof(cls)
    if tail is not None and not missing and c_size > want:
        want = c_size  # the C table goes on past the mirror
    if c_size != want:
        problems.append('%s: sizeof %d in C, %d in Python (up to ABI minor %d)'
                        % (name, c_size, want, c_minor))
    return problems


class Layout(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sizes, cls.offsets, cls.consts, cls.statuses = c_layout()

    def test_every_struct_mirrored(self):
        self.assertEqual(sorted(self.sizes), sorted(STRUCTS))
        problems = []
        for name, cls in STRUCTS.items():
            problems += check_struct(name, cls, self.sizes[name], self.offsets[name],
                                     self.consts['HK_ABI_MINOR'])
        self.assertEqual(problems, [])

    def test_check_finds_a_moved_field(self):
        # The comparison itself: a mirror with one field of another size is caught.
        class Wrong(ctypes.Structure):
            _fields_ = [('size', ctypes.c_uint32), ('device', ctypes.c_int64),
                        ('flags', ctypes.c_uint32)]
        problems = check_struct('hk_create_info_t', Wrong, self.sizes['hk_create_info_t'],
                                self.offsets['hk_create_info_t'], self.consts['HK_ABI_MINOR'])
        self.assertTrue(any('device' in p for p in problems), problems)

    def test_table_mirror_may_stop_early_but_not_skip(self):
        # A mirror of the first slots only is right; one that leaves out a
        # slot before its last is not.
        c_offsets = self.offsets['hk_blas1_v1_t']
        first = sorted(c_offsets, key=c_offsets.get)[:3]  # size, saxpy, daxpy
        short = type('Short', (ctypes.Structure,), {'_fields_': [
            (f, dict(_abi.Blas1V1._fields_)[f]) for f in first]})
        self.assertEqual(check_struct('hk_blas1_v1_t', short, self.sizes['hk_blas1_v1_t'],
                                      c_offsets, self.consts['HK_ABI_MINOR']), [])
        holed = type('Holed', (ctypes.Structure,), {'_fields_': [
            (f, dict(_abi.Blas1V1._fields_)[f]) for f in (first[0], first[2])]})
        problems = check_struct('hk_blas1_v1_t', holed, self.sizes['hk_blas1_v1_t'],
                                c_offsets, self.consts['HK_ABI_MINOR'])
        self.assertTrue(any(first[1] in p for p in problems), problems)

    def test_abi_version(self):
        self.assertEqual(self.consts['HK_ABI_MAJOR'], _abi.ABI_MAJOR)
        self.assertLessEqual(self.consts['HK_ABI_MINOR'], _abi.ABI_MINOR,
                             'the C headers are newer than the Python mirror')

    def test_constants(self):
        mine = {
            'HK_STRUCT_NEGOTIATE_REQUEST': _abi.STRUCT_NEGOTIATE_REQUEST,
            'HK_STRUCT_NEGOTIATE_ANSWER': _abi.STRUCT_NEGOTIATE_ANSWER,
            'HK_PLUGIN_UNLOAD_SAFE': _abi.PLUGIN_UNLOAD_SAFE,
            'HK_PLUGIN_MEMORY_HOST': _abi.PLUGIN_MEMORY_HOST,
            'HK_PLUGIN_MEMORY_CUDA': _abi.PLUGIN_MEMORY_CUDA,
            'HK_DEVICE_CURRENT': _abi.DEVICE_CURRENT,
            'HK_CREATE_CHECKED': _abi.CREATE_CHECKED,
            'HK_POINTER_MODE_HOST': _abi.POINTER_MODE_HOST,
            'HK_POINTER_MODE_DEVICE': _abi.POINTER_MODE_DEVICE,
            'HK_LOG_ERROR': _abi.LOG_ERROR, 'HK_LOG_WARN': _abi.LOG_WARN,
            'HK_LOG_INFO': _abi.LOG_INFO, 'HK_LOG_DEBUG': _abi.LOG_DEBUG,
            'HK_STAGE_SCAN': _abi.STAGE_SCAN, 'HK_STAGE_OPEN': _abi.STAGE_OPEN,
            'HK_STAGE_SYMBOL': _abi.STAGE_SYMBOL, 'HK_STAGE_NEGOTIATE': _abi.STAGE_NEGOTIATE,
            'HK_STAGE_VALIDATE': _abi.STAGE_VALIDATE, 'HK_STAGE_LOADED': _abi.STAGE_LOADED,
        }
        for i, name in enumerate(_abi.SWAP_PHASES):
            mine['HK_SWAP_' + name.upper()] = i
        for i, name in enumerate(_abi.MODULE_STATES):
            mine['HK_MODULE_' + name.upper().replace('-', '_')] = i
        for name, value in self.consts.items():
            if name in ('HK_ABI_MAJOR', 'HK_ABI_MINOR'):
                continue
            self.assertIn(name, mine)
            self.assertEqual(value, mine[name], name)

    def test_statuses(self):
        self.assertEqual(self.statuses, list(_abi.STATUS_MAP))
