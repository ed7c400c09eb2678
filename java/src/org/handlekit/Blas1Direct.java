package org.handlekit;

/**
 * The template of the direct-mapped hk.blas1/1 slots. Its bytes are defined
 * again as a hidden class for each distinct table of slot addresses, and
 * that copy's native methods are registered (JNA's Native.register) to those
 * addresses: a call is one JNI transition with primitive arguments, with no
 * argument conversion. This class itself is never registered nor called.
 */
final class Blas1Direct implements Blas1Calls {
    static native int n_saxpy(long h, long n, long alpha, long x, long incx, long y, long incy);
    static native int n_daxpy(long h, long n, long alpha, long x, long incx, long y, long incy);
    static native int n_sscal(long h, long n, long alpha, long x, long incx);
    static native int n_dscal(long h, long n, long alpha, long x, long incx);
    static native int n_scopy(long h, long n, long x, long incx, long y, long incy);
    static native int n_dcopy(long h, long n, long x, long incx, long y, long incy);
    static native int n_sdot(long h, long n, long x, long incx, long y, long incy, long result);
    static native int n_ddot(long h, long n, long x, long incx, long y, long incy, long result);
    static native int n_snrm2(long h, long n, long x, long incx, long result);
    static native int n_dnrm2(long h, long n, long x, long incx, long result);

    @Override
    public int saxpy(long h, long n, long alpha, long x, long incx, long y, long incy) {
        return n_saxpy(h, n, alpha, x, incx, y, incy);
    }

    @Override
    public int daxpy(long h, long n, long alpha, long x, long incx, long y, long incy) {
        return n_daxpy(h, n, alpha, x, incx, y, incy);
    }

    @Override
    public int sscal(long h, long n, long alpha, long x, long incx) {
        return n_sscal(h, n, alpha, x, incx);
    }

    @Override
    public int dscal(long h, long n, long alpha, long x, long incx) {
        return n_dscal(h, n, alpha, x, incx);
    }

    @Override
    public int scopy(long h, long n, long x, long incx, long y, long incy) {
        return n_scopy(h, n, x, incx, y, incy);
    }

    @Override
    public int dcopy(long h, long n, long x, long incx, long y, long incy) {
        return n_dcopy(h, n, x, incx, y, incy);
    }

    @Override
    public int sdot(long h, long n, long x, long incx, long y, long incy, long result) {
        return n_sdot(h, n, x, incx, y, incy, result);
    }

    @Override
    public int ddot(long h, long n, long x, long incx, long y, long incy, long result) {
        return n_ddot(h, n, x, incx, y, incy, result);
    }

    @Override
    public int snrm2(long h, long n, long x, long incx, long result) {
        return n_snrm2(h, n, x, incx, result);
    }

    @Override
    public int dnrm2(long h, long n, long x, long incx, long result) {
        return n_dnrm2(h, n, x, incx, result);
    }
}
