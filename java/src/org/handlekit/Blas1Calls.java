package org.handlekit;

/** The slots of hk.blas1/1 with every pointer as an address (0: NULL). */
interface Blas1Calls {
    int saxpy(long h, long n, long alpha, long x, long incx, long y, long incy);
    int daxpy(long h, long n, long alpha, long x, long incx, long y, long incy);
    int sscal(long h, long n, long alpha, long x, long incx);
    int dscal(long h, long n, long alpha, long x, long incx);
    int scopy(long h, long n, long x, long incx, long y, long incy);
    int dcopy(long h, long n, long x, long incx, long y, long incy);
    int sdot(long h, long n, long x, long incx, long y, long incy, long result);
    int ddot(long h, long n, long x, long incx, long y, long incy, long result);
    int snrm2(long h, long n, long x, long incx, long result);
    int dnrm2(long h, long n, long x, long incx, long result);
}
