/* hk-bench: a lane (one stream with an hk handle and a cuBLAS handle on it),
 * the op dispatch shared by every figure, result checks and random data. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hkb.h"

/* Offsets in lane->dev_scalars; 8-byte aligned for the doubles. */
#define SC_ALPHA_F 0
#define SC_ALPHA_D 8
#define SC_RES_F 16
#define SC_RES_D 24
#define SC_BYTES 32

static const char *const op_names[HKB_OP_COUNT] = {"axpy", "scal", "copy", "dot", "nrm2"};

const char *hkb_op_name(hkb_op_t op)
{
    return (unsigned)op < HKB_OP_COUNT ? op_names[op] : "?";
}

const char *hkb_prec_name(hkb_prec_t prec)
{
    return prec == HKB_F32 ? "f32" : "f64";
}

size_t hkb_prec_size(hkb_prec_t prec)
{
    return prec == HKB_F32 ? sizeof(float) : sizeof(double);
}

int hkb_op_is_reduction(hkb_op_t op)
{
    return op == HKB_DOT || op == HKB_NRM2;
}

double hkb_op_bytes(hkb_op_t op, hkb_prec_t prec, int64_t n)
{
    static const int per_elem[HKB_OP_COUNT] = {
        [HKB_AXPY] = 3, /* read x, read y, write y */
        [HKB_SCAL] = 2, /* read x, write x */
        [HKB_COPY] = 2, /* read x, write y */
        [HKB_DOT] = 2,  /* read x, read y */
        [HKB_NRM2] = 1, /* read x */
    };
    return (double)per_elem[op] * (double)hkb_prec_size(prec) * (double)n;
}

int hkb_lane_init(hkb_lane_t *lane, const hkb_plugin_t *plug, int device)
{
    const hkb_plugin_t *p = plug;
    hk_create_info_t ci = {sizeof ci, HK_DEVICE_CURRENT, 0};

    memset(lane, 0, sizeof *lane);
    lane->plug = plug;
    lane->device = device;
    /* cudaSetDevice makes the primary context current on this thread; the hk
     * handle then binds to it, so runtime memory and streams are its own. */
    HKB_CUDA(cudaSetDevice(device), fail);
    HKB_CUDA(cudaStreamCreateWithFlags(&lane->stream, cudaStreamNonBlocking), fail);
    HKB_CUBLAS(cublasCreate(&lane->cublas), fail);
    HKB_CUBLAS(cublasSetStream(lane->cublas, lane->stream), fail);
    HKB_TRY(hkb_hk_ok(p, NULL, p->vt.handle_create(&ci, &lane->hk), "handle_create"), fail);
    HKB_TRY(hkb_hk_ok(p, lane->hk, p->vt.set_stream(lane->hk, (void *)lane->stream),
                      "set_stream"), fail);
    void *sc = NULL;
    HKB_TRY(hkb_hk_ok(p, lane->hk, p->mem.alloc(lane->hk, SC_BYTES, &sc), "hk.memory alloc"),
            fail);
    lane->dev_scalars = sc;
    HKB_TRY(hkb_lane_set_mode(lane, HK_POINTER_MODE_HOST), fail);
    HKB_TRY(hkb_lane_set_alpha(lane, 1.0), fail);
    return 0;
fail:
    hkb_lane_fini(lane);
    return -1;
}

void hkb_lane_fini(hkb_lane_t *lane)
{
    const hkb_plugin_t *p = lane->plug;

    /* Teardown after a failure still runs every step; the first reason is kept. */
    if (lane->stream)
        (void)hkb__cuda_ok(cudaStreamSynchronize(lane->stream), "cudaStreamSynchronize",
                           __FILE__, __LINE__);
    if (lane->hk && lane->dev_scalars)
        (void)hkb_hk_ok(p, lane->hk, p->mem.free_(lane->hk, lane->dev_scalars), "hk.memory free_");
    if (lane->hk)
        (void)hkb_hk_ok(p, NULL, p->vt.handle_destroy(lane->hk), "handle_destroy");
    if (lane->cublas)
        (void)hkb__cublas_ok(cublasDestroy(lane->cublas), "cublasDestroy", __FILE__, __LINE__);
    if (lane->stream)
        (void)hkb__cuda_ok(cudaStreamDestroy(lane->stream), "cudaStreamDestroy", __FILE__,
                           __LINE__);
    lane->dev_scalars = NULL;
    lane->hk = NULL;
    lane->cublas = NULL;
    lane->stream = NULL;
}

int hkb_lane_set_mode(hkb_lane_t *lane, hk_pointer_mode_t mode)
{
    const hkb_plugin_t *p = lane->plug;
    HKB_TRY(hkb_hk_ok(p, lane->hk, p->vt.set_pointer_mode(lane->hk, mode), "set_pointer_mode"),
            fail);
    HKB_CUBLAS(cublasSetPointerMode(lane->cublas, mode == HK_POINTER_MODE_DEVICE
                                                      ? CUBLAS_POINTER_MODE_DEVICE
                                                      : CUBLAS_POINTER_MODE_HOST),
               fail);
    lane->mode = mode;
    return 0;
fail:
    return -1;
}

int hkb_lane_set_alpha(hkb_lane_t *lane, double alpha)
{
    const hkb_plugin_t *p = lane->plug;
    unsigned char host[SC_BYTES];

    lane->alpha_f = (float)alpha;
    lane->alpha_d = alpha;
    memset(host, 0, sizeof host);
    memcpy(host + SC_ALPHA_F, &lane->alpha_f, sizeof lane->alpha_f);
    memcpy(host + SC_ALPHA_D, &lane->alpha_d, sizeof lane->alpha_d);
    /* Through hk.memory/1 on purpose: the bench uses that table too. It is
     * ordered after earlier work on the lane's stream. */
    return hkb_hk_ok(p, lane->hk,
                     p->mem.copy_to_device(lane->hk, lane->dev_scalars, host, sizeof host),
                     "hk.memory copy_to_device");
}

static int hk_call(hkb_lane_t *lane, hkb_op_t op, hkb_prec_t prec, int64_t n, const void *x,
                   void *y)
{
    const hk_blas1_v1_t *b = &lane->plug->blas;
    hk_handle_t *h = lane->hk;
    int dev = lane->mode == HK_POINTER_MODE_DEVICE;
    const float *af = dev ? (const float *)(lane->dev_scalars + SC_ALPHA_F) : &lane->alpha_f;
    const double *ad = dev ? (const double *)(lane->dev_scalars + SC_ALPHA_D) : &lane->alpha_d;
    float *rf = dev ? (float *)(lane->dev_scalars + SC_RES_F) : &lane->result_f;
    double *rd = dev ? (double *)(lane->dev_scalars + SC_RES_D) : &lane->result_d;
    hk_status_t st = HK_STATUS_INTERNAL;
    int f = prec == HKB_F32;

    switch (op) {
    case HKB_AXPY:
        st = f ? b->saxpy(h, n, af, x, 1, y, 1) : b->daxpy(h, n, ad, x, 1, y, 1);
        break;
    case HKB_SCAL:
        st = f ? b->sscal(h, n, af, y, 1) : b->dscal(h, n, ad, y, 1);
        break;
    case HKB_COPY:
        st = f ? b->scopy(h, n, x, 1, y, 1) : b->dcopy(h, n, x, 1, y, 1);
        break;
    case HKB_DOT:
        st = f ? b->sdot(h, n, x, 1, y, 1, rf) : b->ddot(h, n, x, 1, y, 1, rd);
        break;
    case HKB_NRM2:
        st = f ? b->snrm2(h, n, x, 1, rf) : b->dnrm2(h, n, x, 1, rd);
        break;
    default:
        break;
    }
    if (st == HK_STATUS_OK)
        return 0;
    char what[32];
    snprintf(what, sizeof what, "hk %c%s", f ? 's' : 'd', hkb_op_name(op));
    return hkb_hk_ok(lane->plug, h, st, what);
}

static int cublas_call(hkb_lane_t *lane, hkb_op_t op, hkb_prec_t prec, int64_t n,
                       const void *x, void *y)
{
    cublasHandle_t c = lane->cublas;
    int dev = lane->mode == HK_POINTER_MODE_DEVICE;
    const float *af = dev ? (const float *)(lane->dev_scalars + SC_ALPHA_F) : &lane->alpha_f;
    const double *ad = dev ? (const double *)(lane->dev_scalars + SC_ALPHA_D) : &lane->alpha_d;
    float *rf = dev ? (float *)(lane->dev_scalars + SC_RES_F) : &lane->result_f;
    double *rd = dev ? (double *)(lane->dev_scalars + SC_RES_D) : &lane->result_d;
    cublasStatus_t st = CUBLAS_STATUS_INTERNAL_ERROR;
    int f = prec == HKB_F32;

    /* The 64-bit entry points take the same int64_t n as hk's table. */
    switch (op) {
    case HKB_AXPY:
        st = f ? cublasSaxpy_64(c, n, af, x, 1, y, 1) : cublasDaxpy_64(c, n, ad, x, 1, y, 1);
        break;
    case HKB_SCAL:
        st = f ? cublasSscal_64(c, n, af, y, 1) : cublasDscal_64(c, n, ad, y, 1);
        break;
    case HKB_COPY:
        st = f ? cublasScopy_64(c, n, x, 1, y, 1) : cublasDcopy_64(c, n, x, 1, y, 1);
        break;
    case HKB_DOT:
        st = f ? cublasSdot_64(c, n, x, 1, y, 1, rf) : cublasDdot_64(c, n, x, 1, y, 1, rd);
        break;
    case HKB_NRM2:
        st = f ? cublasSnrm2_64(c, n, x, 1, rf) : cublasDnrm2_64(c, n, x, 1, rd);
        break;
    default:
        break;
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        return 0;
    return hkb_fail("cublas %c%s: %s (%s)", f ? 'S' : 'D', hkb_op_name(op),
                    cublasGetStatusString(st), cublasGetStatusName(st));
}

int hkb_call(hkb_lane_t *lane, hkb_impl_t impl, hkb_op_t op, hkb_prec_t prec, int64_t n,
             const void *x, void *y)
{
    if (impl == HKB_HK)
        return hk_call(lane, op, prec, n, x, y);
    return cublas_call(lane, op, prec, n, x, y);
}

/* Reads the scalar result of the last reduction in the lane's pointer mode. */
static int read_result(hkb_lane_t *lane, hkb_prec_t prec, double *out)
{
    if (lane->mode == HK_POINTER_MODE_DEVICE) {
        unsigned char host[SC_BYTES];
        HKB_CUDA(cudaStreamSynchronize(lane->stream), fail);
        HKB_CUDA(cudaMemcpy(host, lane->dev_scalars, sizeof host, cudaMemcpyDeviceToHost), fail);
        memcpy(&lane->result_f, host + SC_RES_F, sizeof lane->result_f);
        memcpy(&lane->result_d, host + SC_RES_D, sizeof lane->result_d);
    }
    *out = prec == HKB_F32 ? (double)lane->result_f : lane->result_d;
    return 0;
fail:
    return -1;
}

/* Relative 2-norm distance of w from r, computed by cuBLAS in host mode; w is
 * overwritten. The lane's pointer mode is restored afterwards. */
static int vec_rel_err(hkb_lane_t *lane, hkb_prec_t prec, int64_t n, void *w, const void *r,
                       double *err)
{
    hk_pointer_mode_t mode = lane->mode;
    cublasHandle_t c = lane->cublas;
    double num = 0.0, den = 0.0;
    int rc = -1;

    HKB_CUBLAS(cublasSetPointerMode(c, CUBLAS_POINTER_MODE_HOST), out);
    if (prec == HKB_F32) {
        const float m1 = -1.0f;
        float a = 0.0f, b = 0.0f;
        HKB_CUBLAS(cublasSnrm2_64(c, n, r, 1, &b), out);
        HKB_CUBLAS(cublasSaxpy_64(c, n, &m1, r, 1, w, 1), out);
        HKB_CUBLAS(cublasSnrm2_64(c, n, w, 1, &a), out);
        num = a;
        den = b;
    } else {
        const double m1 = -1.0;
        HKB_CUBLAS(cublasDnrm2_64(c, n, r, 1, &den), out);
        HKB_CUBLAS(cublasDaxpy_64(c, n, &m1, r, 1, w, 1), out);
        HKB_CUBLAS(cublasDnrm2_64(c, n, w, 1, &num), out);
    }
    *err = den > 0.0 ? num / den : num;
    rc = 0;
out:
    if (hkb_lane_set_mode(lane, mode) != 0)
        rc = -1;
    return rc;
}

int hkb_verify(hkb_lane_t *lane, hkb_op_t op, hkb_prec_t prec, int64_t n, const void *x,
               const void *y, void *w, void *r, double *err)
{
    size_t bytes = (size_t)n * hkb_prec_size(prec);
    int f = prec == HKB_F32;
    /* Vector ops differ from cuBLAS at most by FMA contraction (an ulp per
     * element); reductions add in another order, whose error grows with n. */
    double tol = hkb_op_is_reduction(op) ? (f ? 5e-4 : 1e-10) : (f ? 1e-5 : 1e-12);

    *err = NAN;
    if (hkb_op_is_reduction(op)) {
        /* dot and nrm2 only read y; hkb_call's y is writable for the others. */
        void *yr = (void *)(uintptr_t)y;
        double a = 0.0, b = 0.0;
        HKB_TRY(hkb_call(lane, HKB_HK, op, prec, n, x, yr), fail);
        HKB_TRY(read_result(lane, prec, &a), fail);
        HKB_TRY(hkb_call(lane, HKB_CUBLAS, op, prec, n, x, yr), fail);
        HKB_TRY(read_result(lane, prec, &b), fail);
        *err = b != 0.0 ? fabs(a - b) / fabs(b) : fabs(a);
        if (!(*err <= tol)) /* also catches NaN */
            return hkb_fail("wrong result: hk %.9g, cuBLAS %.9g, relative error %.2e > %.0e",
                            a, b, *err, tol);
        return 0;
    }
    HKB_CUDA(cudaMemcpyAsync(w, y, bytes, cudaMemcpyDeviceToDevice, lane->stream), fail);
    HKB_CUDA(cudaMemcpyAsync(r, y, bytes, cudaMemcpyDeviceToDevice, lane->stream), fail);
    HKB_TRY(hkb_call(lane, HKB_HK, op, prec, n, x, w), fail);
    HKB_TRY(hkb_call(lane, HKB_CUBLAS, op, prec, n, x, r), fail);
    HKB_TRY(vec_rel_err(lane, prec, n, w, r, err), fail);
    if (!(*err <= tol))
        return hkb_fail("wrong result: |hk - cuBLAS| / |cuBLAS| = %.2e > %.0e", *err, tol);
    return 0;
fail:
    return -1;
}

/* xorshift64*: fast and good enough to keep the data from being constant. */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

int hkb_fill_random(void *dev, hkb_prec_t prec, int64_t n, uint64_t seed)
{
    enum { BLOCK_ELEMS = 1 << 21 }; /* 8 or 16 MiB on the host */
    size_t es = hkb_prec_size(prec);
    size_t total = (size_t)n * es;
    size_t first = (size_t)(n < BLOCK_ELEMS ? n : BLOCK_ELEMS);
    unsigned char *host = NULL;
    uint64_t s = seed * UINT64_C(0x9e3779b97f4a7c15) + 1;
    int rc = -1;

    if (n <= 0)
        return 0;
    host = malloc(first * es);
    if (!host)
        return hkb_fail("hkb_fill_random: out of host memory (%zu bytes)", first * es);
    /* Values in [0.5, 1.5): no cancellation, so dot and nrm2 compare tightly. */
    for (size_t i = 0; i < first; i++) {
        double v = 0.5 + (double)(next_rand(&s) >> 11) * (1.0 / 9007199254740992.0);
        if (prec == HKB_F32)
            ((float *)host)[i] = (float)v;
        else
            ((double *)host)[i] = v;
    }
    HKB_CUDA(cudaMemcpy(dev, host, first * es, cudaMemcpyHostToDevice), out);
    /* Doubling device copies fill gigabytes in milliseconds; the repeat every
     * block does not matter to bandwidth or to the checks. */
    for (size_t done = first * es; done < total;) {
        size_t len = done < total - done ? done : total - done;
        HKB_CUDA(cudaMemcpy((unsigned char *)dev + done, dev, len, cudaMemcpyDeviceToDevice), out);
        done += len;
    }
    /* Device-to-device cudaMemcpy does not wait on the host side, and the
     * lanes' streams do not wait on the legacy stream: finish here. */
    HKB_CUDA(cudaDeviceSynchronize(), out);
    rc = 0;
out:
    free(host);
    return rc;
}
