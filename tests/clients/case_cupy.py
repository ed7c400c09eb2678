"""CuPy as a client of hk-cuda: a CuPy stream captured with
Stream.begin_capture / end_capture in each capture mode, the handle's stream
set inside the capture, through the handlekit package and the raw ABI, the
graph launched and checked against CuPy's own results; and the same PTX
launched by a cupy.RawKernel and by hk.kernels/1, outside and inside a
capture, giving the same bytes. After every call of the plugin the caller's
current context and the capture status of the stream must be unchanged."""
import ctypes
from ctypes import byref, c_float, c_longlong, c_void_p

import handlekit

from hkclient import POINTER_MODE_DEVICE, Driver, Raw, Skip, Watch, need

MODES = (('global', 0), ('thread_local', 1), ('relaxed', 2))  # cudaStreamCaptureMode
N = 1 << 16
KERNEL = b'hkc_saxpy'  # in the PTX of client_kernels.cu


def _cupy():
    cupy = need('cupy')
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise Skip('CuPy sees no CUDA device')
    except cupy.cuda.runtime.CUDARuntimeError as e:
        raise Skip('CuPy sees no CUDA device: %s' % e) from None
    return cupy


def _same(cupy, got, want, what, exact=False):
    ok = bool(cupy.array_equal(got, want)) if exact else \
        bool(cupy.allclose(got, want, rtol=1e-4, atol=1e-3))
    if not ok:
        raise AssertionError('%s: %s, CuPy says %s' % (what, cupy.asnumpy(got).ravel()[:4],
                                                       cupy.asnumpy(want).ravel()[:4]))


def capture(api, mode, non_blocking):
    cupy = _cupy()
    drv = Driver()
    cupy.cuda.Device(0).use()
    x = cupy.random.default_rng(3).standard_normal(N, dtype=cupy.float32)
    y0 = cupy.random.default_rng(4).standard_normal(N, dtype=cupy.float32)
    y = y0.copy()
    alpha = cupy.array([2.0], dtype=cupy.float32)
    out = cupy.zeros(2, dtype=cupy.float32)
    s = cupy.cuda.Stream(non_blocking=non_blocking)
    cupy.cuda.Device(0).synchronize()
    if api == 'package':
        h = handlekit.load('hk-cuda').handle()
        h.pointer_mode = 'device'
    else:
        raw = Raw()
        rh = raw.create()
        raw.call(rh, raw.vt.set_pointer_mode(rh, POINTER_MODE_DEVICE), 'set_pointer_mode')
    try:
        with s:
            s.begin_capture(mode)
            try:
                w = Watch(drv, s.ptr)
                if api == 'package':
                    h.stream = s
                    w.check('set_stream')
                    h.axpy(alpha, x, y)
                    w.check('axpy')
                    h.dot(x, y, out=out[0:1])
                    h.nrm2(x, out=out[1:2])
                    w.check('dot, nrm2')
                else:
                    raw.call(rh, raw.vt.set_stream(rh, s.ptr), 'set_stream')
                    raw.call(rh, raw.blas.saxpy(rh, N, alpha.data.ptr, x.data.ptr, 1, y.data.ptr,
                                                1), 'saxpy')
                    raw.call(rh, raw.blas.sdot(rh, N, x.data.ptr, 1, y.data.ptr, 1,
                                               out.data.ptr), 'sdot')
                    raw.call(rh, raw.blas.snrm2(rh, N, x.data.ptr, 1, out.data.ptr + 4), 'snrm2')
                    w.check('set_stream, saxpy, sdot, snrm2')
            finally:
                g = s.end_capture()
        _same(cupy, y, y0, 'y after the capture (nothing ran)', exact=True)
        for k in (1, 2):
            g.launch(stream=s)
            s.synchronize()
            want = y0 + 2 * k * x
            _same(cupy, y, want, 'y after launch %d' % k)
            _same(cupy, out[0], cupy.dot(x, want), 'dot after launch %d' % k)
            _same(cupy, out[1], cupy.linalg.norm(x), 'nrm2 after launch %d' % k)
    finally:
        if api == 'package':
            h.stream = None
            h.close()
        else:
            raw.call(rh, raw.vt.set_stream(rh, None), 'set_stream')
            raw.call(None, raw.vt.handle_destroy(rh), 'handle_destroy')
            raw.close()


def same_ptx(ptx_path):
    """The kernel of one PTX file run by cupy.RawKernel and by hk.kernels/1 on
    the same inputs, directly and inside a capture: the same bytes."""
    cupy = _cupy()
    if not ptx_path:
        raise Skip('no PTX file given (run.py --ptx; built from client_kernels.cu with nvcc)')
    drv = Driver()
    cupy.cuda.Device(0).use()
    with open(ptx_path, 'rb') as f:
        ptx = f.read()
    module = cupy.RawModule(path=ptx_path)
    ck = module.get_function(KERNEL.decode())
    x = cupy.random.default_rng(5).standard_normal(N, dtype=cupy.float32)
    y0 = cupy.random.default_rng(6).standard_normal(N, dtype=cupy.float32)
    by_cupy, by_hk = y0.copy(), y0.copy()
    s = cupy.cuda.Stream(non_blocking=True)
    raw = Raw()
    h = raw.create()
    lib, k = c_void_p(), c_void_p()
    image = ptx + b'\0'
    try:
        raw.call(h, raw.kern.load(h, image, len(image), byref(lib)), 'hk.kernels/1 load')
        raw.call(h, raw.kern.get_kernel(h, lib, KERNEL, byref(k)), 'get_kernel')
        raw.call(h, raw.vt.set_stream(h, s.ptr), 'set_stream')
        n, a = c_longlong(N), c_float(1.5)
        xp, yp = c_void_p(x.data.ptr), c_void_p(by_hk.data.ptr)
        args = (c_void_p * 4)(*[ctypes.cast(byref(v), c_void_p) for v in (n, a, xp, yp)])
        grid = (N + 255) // 256

        def both():
            ck((grid,), (256,), (cupy.int64(N), cupy.float32(1.5), x, by_cupy))
            raw.call(h, raw.kern.launch(h, k, grid, 1, 1, 256, 1, 1, 0, args), 'launch')
        with s:
            both()
            s.synchronize()
            _same(cupy, by_hk, by_cupy, 'hk.kernels/1 against cupy.RawKernel', exact=True)
            s.begin_capture(0)
            try:
                w = Watch(drv, s.ptr)
                both()
                w.check('hk.kernels/1 launch in the capture')
            finally:
                g = s.end_capture()
            g.launch(stream=s)
            s.synchronize()
        _same(cupy, by_hk, by_cupy, 'after the graph: hk.kernels/1 against cupy.RawKernel',
              exact=True)
        _same(cupy, by_hk, y0 + 2 * cupy.float32(1.5) * x, 'against CuPy arithmetic')
    finally:
        raw.call(h, raw.vt.set_stream(h, None), 'set_stream')
        if lib.value:
            raw.call(h, raw.kern.unload(h, lib), 'unload')
        raw.call(None, raw.vt.handle_destroy(h), 'handle_destroy')
        raw.close()


def cases(ptx_path=None):
    out = []
    for api in ('package', 'raw'):
        for name, mode in MODES:
            for nb in (True, False):
                out.append(('cupy %s: begin_capture/end_capture, %s, %s stream'
                            % (api, name, 'non-blocking' if nb else 'blocking'),
                            lambda a=api, m=mode, b=nb: capture(a, m, b)))
    out.append(('cupy raw: the same PTX by cupy.RawKernel and hk.kernels/1',
                lambda: same_ptx(ptx_path)))
    return out
