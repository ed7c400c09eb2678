"""PyTorch as a client of hk-cuda, through the handlekit package and through
the raw ABI: CUDA graphs (torch.cuda.graph) with the handle's stream set
inside and outside the capture in each capture_error_mode, replayed and
checked against torch's own results; 8 threads each on a torch stream of its
own; torch.cuda.device guards, on a second device where there is one. After
every call of the plugin the caller's current context and the capture
status of torch's stream must be what they were."""
import threading

import handlekit

from hkclient import POINTER_MODE_DEVICE, Driver, Raw, Skip, Watch, need

MODES = ('global', 'thread_local', 'relaxed')
N = 1 << 16


def _torch():
    torch = need('torch')
    if not torch.cuda.is_available():
        raise Skip('PyTorch sees no CUDA device (torch.cuda.is_available() is False)')
    return torch


class PackageOps:
    """The ops through a handlekit Handle (tensors by __cuda_array_interface__)."""

    def __init__(self, device=None):
        self.h = handlekit.load('hk-cuda').handle(device=device)
        self.h.pointer_mode = 'device'

    def set_stream(self, stream):
        self.h.stream = stream

    def axpy(self, alpha, x, y):
        self.h.axpy(alpha, x, y)

    def dot(self, x, y, out):
        self.h.dot(x, y, out=out)

    def nrm2(self, x, out):
        self.h.nrm2(x, out=out)

    def close(self):
        self.h.stream = None
        self.h.close()


class RawOps:
    """The same through the plugin's vtable and hk.blas1/1, slot by slot."""

    def __init__(self, device=-1, raw=None):
        self.raw, self.own = (raw, False) if raw else (Raw(), True)
        self.h = self.raw.create(device)
        self.raw.call(self.h, self.raw.vt.set_pointer_mode(self.h, POINTER_MODE_DEVICE),
                      'set_pointer_mode')

    def set_stream(self, stream):
        s = stream if isinstance(stream, int) or stream is None else stream.cuda_stream
        self.raw.call(self.h, self.raw.vt.set_stream(self.h, s), 'set_stream')

    def axpy(self, alpha, x, y):
        self.raw.call(self.h, self.raw.blas.saxpy(self.h, x.numel(), alpha.data_ptr(),
                                                  x.data_ptr(), 1, y.data_ptr(), 1), 'saxpy')

    def dot(self, x, y, out):
        self.raw.call(self.h, self.raw.blas.sdot(self.h, x.numel(), x.data_ptr(), 1,
                                                 y.data_ptr(), 1, out.data_ptr()), 'sdot')

    def nrm2(self, x, out):
        self.raw.call(self.h, self.raw.blas.snrm2(self.h, x.numel(), x.data_ptr(), 1,
                                                  out.data_ptr()), 'snrm2')

    def close(self):
        self.set_stream(None)
        self.raw.call(None, self.raw.vt.handle_destroy(self.h), 'handle_destroy')
        if self.own:
            self.raw.close()


def _ops(api, device=None, raw=None):
    if api == 'package':
        return PackageOps(device)
    return RawOps(-1 if device is None else device, raw)


def _close(torch, got, want, what):
    if not torch.allclose(got, want, rtol=1e-4, atol=1e-3):
        raise AssertionError('%s: %s, torch says %s (largest difference %g)'
                             % (what, got.flatten()[:4].tolist(), want.flatten()[:4].tolist(),
                                (got - want).abs().max().item()))


def graph(api, mode, set_inside):
    """y += 2x; out = (x.y, |x|) captured with torch.cuda.graph; replayed twice."""
    torch = _torch()
    drv = Driver()
    torch.cuda.set_device(0)
    gen = torch.Generator(device='cuda').manual_seed(7)
    x = torch.randn(N, device='cuda', generator=gen)
    y0 = torch.randn(N, device='cuda', generator=gen)
    y = y0.clone()
    alpha = torch.tensor([2.0], device='cuda')
    out = torch.zeros(2, device='cuda')
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    ops = _ops(api)
    try:
        if not set_inside:
            ops.set_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=None if set_inside else side, capture_error_mode=mode):
            cap = torch.cuda.current_stream().cuda_stream
            w = Watch(drv, cap)
            if w.status != 1:
                raise AssertionError('torch stream %#x is not capturing (%d)' % (cap, w.status))
            if set_inside:
                ops.set_stream(torch.cuda.current_stream())
                w.check('set_stream')
            ops.axpy(alpha, x, y)
            w.check('axpy')
            ops.dot(x, y, out[0:1])
            w.check('dot')
            ops.nrm2(x, out[1:2])
            w.check('nrm2')
        _close(torch, y, y0, 'y after the capture (nothing ran)')
        for k in (1, 2):
            g.replay()
            torch.cuda.synchronize()
            want = y0 + 2 * k * x
            _close(torch, y, want, 'y after replay %d' % k)
            _close(torch, out[0], torch.dot(x, want), 'dot after replay %d' % k)
            _close(torch, out[1], torch.linalg.vector_norm(x), 'nrm2 after replay %d' % k)
        del g
    finally:
        ops.close()


def threads8(api):
    """8 threads, a handle and a torch stream each, 20 rounds of axpy and dot,
    every result checked against torch on the same stream."""
    torch = _torch()
    drv = Driver()
    torch.cuda.set_device(0)
    torch.zeros(1, device='cuda')  # device 0's primary current: the handles bind to it
    errors = []
    raw = Raw() if api == 'raw' else None
    handles = [_ops(api, raw=raw) for _ in range(8)]  # made here, used by one thread each

    def work(i):
        try:
            torch.cuda.set_device(0)
            s = torch.cuda.Stream()
            ops = handles[i]
            try:
                with torch.cuda.stream(s):
                    x = torch.full((N,), float(i + 1), device='cuda')
                    y = torch.ones(N, device='cuda')
                    alpha = torch.tensor([0.5], device='cuda')
                    out = torch.zeros(1, device='cuda')
                ops.set_stream(s)
                w = Watch(drv, s.cuda_stream)
                for r in range(20):
                    ops.axpy(alpha, x, y)
                    ops.dot(x, y, out)
                    w.check('round %d' % r)
                s.synchronize()
                want = torch.ones(N, device='cuda') + 20 * 0.5 * x
                _close(torch, y, want, 'thread %d y' % i)
                _close(torch, out[0], torch.dot(x, want), 'thread %d dot' % i)
            finally:
                ops.close()
        except Exception as e:  # reported by the main thread
            errors.append('thread %d: %s' % (i, e))

    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if raw:
        raw.close()
    if errors:
        raise AssertionError('; '.join(errors))


def _guarded_ops(torch, drv, api, d):
    """A handle made inside torch.cuda.device(d), its ops checked there."""
    with torch.cuda.device(d):
        torch.zeros(1, device='cuda')  # the device's primary context current
        ops = _ops(api)
        x = torch.arange(1.0, 1025.0, device='cuda')
        y = torch.ones(1024, device='cuda')
        alpha = torch.tensor([3.0], device='cuda')
        out = torch.zeros(1, device='cuda')
        w = Watch(drv)
        ops.axpy(alpha, x, y)
        ops.dot(x, y, out)
        w.check('device %d ops' % d)
        torch.cuda.synchronize(d)
        _close(torch, y, 1 + 3 * x, 'device %d y' % d)
        _close(torch, out[0], torch.dot(x, 1 + 3 * x), 'device %d dot' % d)
    return ops


def device_guards(api):
    """A handle made inside a torch.cuda.device guard binds to that device's
    primary context; its calls leave the caller's context as it was."""
    torch = _torch()
    _guarded_ops(torch, Driver(), api, 0).close()


def second_device(api):
    """Handles on devices 0 and 1 made inside guards; device 0's handle called
    while device 1 is current leaves device 1 current and computes on 0."""
    torch = _torch()
    if torch.cuda.device_count() < 2:
        raise Skip('needs two devices, this machine has one')
    drv = Driver()
    h0 = _guarded_ops(torch, drv, api, 0)
    h1 = _guarded_ops(torch, drv, api, 1)
    try:
        with torch.cuda.device(0):
            x0 = torch.ones(256, device='cuda')
            out0 = torch.zeros(1, device='cuda')
            torch.cuda.synchronize()
        with torch.cuda.device(1):
            w = Watch(drv)
            h0.dot(x0, x0, out0)
            w.check("device 0's handle called with device 1 current")
            if torch.cuda.current_device() != 1:
                raise AssertionError('torch.cuda.current_device() is %d after the call'
                                     % torch.cuda.current_device())
        torch.cuda.synchronize(0)
        _close(torch, out0[0], torch.tensor(256.0, device='cuda:0'), 'dot on device 0')
    finally:
        h0.close()
        h1.close()


def cases():
    out = []
    for api in ('package', 'raw'):
        for mode in MODES:
            out.append(('torch %s: graph, stream set inside the capture, %s' % (api, mode),
                        lambda a=api, m=mode: graph(a, m, True)))
            out.append(('torch %s: graph, stream set before the capture, %s' % (api, mode),
                        lambda a=api, m=mode: graph(a, m, False)))
        out.append(('torch %s: 8 threads, a torch stream each' % api,
                    lambda a=api: threads8(a)))
        out.append(('torch %s: a handle made inside a torch.cuda.device guard' % api,
                    lambda a=api: device_guards(a)))
        out.append(('torch %s: two devices, a handle called with the other one current' % api,
                    lambda a=api: second_device(a)))
    return out
