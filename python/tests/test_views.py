"""Array views on hk-cpu against NumPy: every hk.blas1/1 op on reversed,
strided, offset and stride-0 views computes on the elements the view shows,
in both precisions, or is refused with ValueError (a stride-0 view written
to, or given to nrm2) before anything is touched."""
import unittest

try:
    import numpy as np
except ImportError:  # tools/setup.sh installs python3-numpy
    np = None

import handlekit as hk


def views(base):
    """Named 8-element views of a 40-element base, in every direction."""
    return {
        'contiguous': base[3:11],
        'reversed': base[10:2:-1],
        'strided': base[1:25:3],
        'reversed strided': base[37:13:-3],
        'reversed step 2 from the end': base[::-5],
    }


class Interface:
    """n elements of base from element start, stride elements apart, as a
    hand-made __array_interface__ (NumPy describes a one-element view of any
    stride as contiguous)."""

    def __init__(self, base, start, stride, n):
        self.base = base
        isz = base.dtype.itemsize
        self.__array_interface__ = {
            'shape': (n,), 'typestr': base.dtype.str, 'version': 3, 'strides': (stride * isz,),
            'data': (base.__array_interface__['data'][0] + start * isz, False)}


def stride0(base, n=8):
    """n elements that are all base[4] (a broadcast view)."""
    return np.lib.stride_tricks.as_strided(base[4:], shape=(n,), strides=(0,))


@unittest.skipIf(np is None, 'NumPy is not installed')
class Views(unittest.TestCase):
    def setUp(self):
        self.h = hk.load('hk-cpu').handle()
        self.rng = np.random.default_rng(11)

    def tearDown(self):
        self.h.close()

    def base(self, dt):
        return self.rng.standard_normal(40).astype(dt)

    def each(self):
        """(subTest, dtype, tolerance, view name) for every case."""
        for dt, tol in ((np.float32, 1e-5), (np.float64, 1e-13)):
            for name in views(np.zeros(40)):
                yield self.subTest(dtype=dt.__name__, view=name), dt, tol, name

    def test_scal(self):
        for sub, dt, tol, name in self.each():
            with sub:
                got = self.base(dt)
                want = got.copy()
                views(want)[name][...] *= dt(2.5)
                x = views(got)[name]
                self.assertIs(self.h.scal(2.5, x), x)
                np.testing.assert_allclose(got, want, rtol=tol)

    def test_axpy_every_pair(self):
        for sub, dt, tol, xname in self.each():
            with sub:
                for yname in views(np.zeros(40)):
                    xb, got = self.base(dt), self.base(dt)
                    want = got.copy()
                    x = views(xb)[xname]
                    views(want)[yname][...] += dt(-0.75) * x
                    self.h.axpy(-0.75, x, views(got)[yname])
                    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=yname)

    def test_copy_every_pair(self):
        for sub, dt, tol, xname in self.each():
            with sub:
                for yname in views(np.zeros(40)):
                    xb, got = self.base(dt), self.base(dt)
                    want = got.copy()
                    views(want)[yname][...] = views(xb)[xname]
                    self.h.copy(views(xb)[xname], views(got)[yname])
                    np.testing.assert_array_equal(got, want, err_msg=yname)

    def test_dot_every_pair(self):
        for sub, dt, tol, xname in self.each():
            with sub:
                for yname in views(np.zeros(40)):
                    xb, yb = self.base(dt), self.base(dt)
                    x, y = views(xb)[xname], views(yb)[yname]
                    want = float(np.dot(x.astype(np.float64), y.astype(np.float64)))
                    self.assertAlmostEqual(self.h.dot(x, y), want, delta=tol * 10, msg=yname)

    def test_nrm2(self):
        for sub, dt, tol, name in self.each():
            with sub:
                x = views(self.base(dt))[name]
                self.assertAlmostEqual(self.h.nrm2(x), float(np.linalg.norm(x.astype(np.float64))),
                                       delta=tol * 10)

    def test_device_pointer_mode(self):
        self.h.pointer_mode = 'device'
        b = self.base(np.float64)
        x = views(b)['reversed strided']
        out = np.zeros(1)
        self.h.nrm2(x, out=out)
        self.assertAlmostEqual(out[0], float(np.linalg.norm(x)), delta=1e-12)
        want = b.copy()
        views(want)['reversed'][...] *= 3.0
        self.h.scal(np.array([3.0]), views(b)['reversed'])
        np.testing.assert_allclose(b, want, rtol=1e-15)

    def test_stride0_sources(self):
        for dt, tol in ((np.float32, 1e-5), (np.float64, 1e-13)):
            with self.subTest(dtype=dt.__name__):
                xb = self.base(dt)
                one = stride0(xb)
                y = self.base(dt)[:8]
                want = y + dt(0.5) * one
                self.h.axpy(0.5, one, y)
                np.testing.assert_allclose(y, want, rtol=tol)
                self.assertAlmostEqual(self.h.dot(one, y[:8]),
                                       float(np.dot(one.astype(float), y[:8].astype(float))),
                                       delta=tol * 10)
                self.assertAlmostEqual(self.h.dot(y[7::-1], one),
                                       float(np.dot(one.astype(float), y[7::-1].astype(float))),
                                       delta=tol * 10)
                c = np.zeros(8, dtype=dt)
                self.h.copy(one, c[::-1])
                np.testing.assert_array_equal(c, np.full(8, xb[4], dtype=dt))

    def test_stride0_refused_where_no_call_can(self):
        b = self.base(np.float64)
        keep = b.copy()
        x = np.arange(8.0)
        for call, what in ((lambda: self.h.scal(2.0, stride0(b)), 'x'),
                           (lambda: self.h.axpy(1.0, x, stride0(b)), 'y'),
                           (lambda: self.h.copy(x, stride0(b)), 'y'),
                           (lambda: self.h.nrm2(stride0(b)), 'x')):
            with self.subTest(what=what):
                with self.assertRaisesRegex(ValueError, '^%s: .*stride 0' % what):
                    call()
                np.testing.assert_array_equal(b, keep)

    def test_one_element_views_any_stride(self):
        for stride in (0, -5, 7):
            with self.subTest(stride=stride):
                b = self.base(np.float64)
                one, was = Interface(b, 4, stride, 1), b[4]
                self.assertEqual(self.h.nrm2(one), abs(was))
                self.h.scal(2.0, one)
                self.assertEqual(b[4], 2 * was)
                y = np.zeros(1)
                self.h.copy(one, Interface(y, 0, stride, 1))
                self.assertEqual(y[0], 2 * was)

    def test_empty_views(self):
        e = np.zeros(0)
        self.assertEqual(self.h.nrm2(e[::-1]), 0.0)
        self.assertEqual(self.h.dot(e, e[::-1]), 0.0)
        self.h.scal(2.0, e[::-1])
        self.h.axpy(2.0, e, e[::-1])
