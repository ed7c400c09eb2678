/* A plain CUDA runtime program as a client of hk-cuda, through the loader
 * and the raw ABI: cudaSetDevice, cudaMalloc, a handle bound to what the
 * runtime made current, then, in each capture mode, cudaStreamBeginCapture
 * on a stream of the runtime, the handle's stream set inside the capture,
 * saxpy, sdot and snrm2 in device pointer mode, a host pointer mode sdot
 * refused with NOT_SUPPORTED, cudaStreamEndCapture, cudaGraphInstantiate and
 * two launches, every result checked against the host. After each call of
 * the plugin the runtime's device and the capture's status must be as they
 * were.
 *
 * usage: cudart_client PLUGIN.so   (hk-cuda's file, opened by the loader)
 * Prints "PASS case", "FAIL case: why" or "skipped: case: why" lines and
 * ends with "N passed, N failed, N skipped"; exit status 1 on a failure.
 * Built with nvcc (it links the CUDA runtime) when nvcc is found. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hk_blas1.h"
#include "hk_loader.h"
#include "hk_status_text.h"

#define N 4096

/* The runtime's enums, named as C needs them. */
typedef enum cudaStreamCaptureMode capture_mode_t;
typedef enum cudaStreamCaptureStatus capture_status_t;

static int passed, failed, skipped;

typedef struct client {
    const hk_vtable_t *vt;
    const hk_blas1_v1_t *blas;
    hk_handle_t *h;
    float *x, *y, *r, *alpha; /* device memory of the runtime */
    float hx[N], hy[N];
} client_t;

/* The runtime's device and the capture status of s, which every call of
 * the plugin must leave as they were. */
typedef struct state {
    int device;
    capture_status_t cs;
} state_t;

static state_t state_of(cudaStream_t s)
{
    state_t st = {-1, cudaStreamCaptureStatusNone};
    cudaGetDevice(&st.device);
    if (s)
        cudaStreamIsCapturing(s, &st.cs);
    return st;
}

/* Checks a plugin call: its status, then the caller's state. Returns 0 when
 * both are right, else prints why into why. */
static int check(const client_t *c, hk_status_t got, hk_status_t want, const char *what,
                 cudaStream_t s, state_t before, char *why, size_t len)
{
    state_t after = state_of(s);
    if (got != want)
        snprintf(why, len, "%s gave %s, want %s: %s", what, hk_status_name(got),
                 hk_status_name(want), c->vt->last_error(c->h));
    else if (after.device != before.device)
        snprintf(why, len, "%s changed the runtime's device %d -> %d", what, before.device,
                 after.device);
    else if (after.cs != before.cs)
        snprintf(why, len, "%s changed the capture status %d -> %d", what, (int)before.cs,
                 (int)after.cs);
    else
        return 0;
    return -1;
}

/* One capture in mode: returns 0, or -1 with why. */
static int capture_case(client_t *c, capture_mode_t mode, char *why, size_t len)
{
    cudaStream_t s = NULL;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    int rc = -1;
    float host_result = 42.0f;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMemcpy(c->y, c->hy, sizeof c->hy, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemset(c->r, 0, 2 * sizeof(float)) != cudaSuccess) {
        snprintf(why, len, "setting up: %s", cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    if (cudaStreamBeginCapture(s, mode) != cudaSuccess) {
        snprintf(why, len, "cudaStreamBeginCapture failed");
        goto out;
    }
    state_t st = state_of(s);
    int bad = check(c, c->vt->set_stream(c->h, s), HK_STATUS_OK, "set_stream", s, st, why, len) ||
              check(c, c->blas->saxpy(c->h, N, c->alpha, c->x, 1, c->y, 1), HK_STATUS_OK,
                    "saxpy", s, st, why, len) ||
              check(c, c->blas->sdot(c->h, N, c->x, 1, c->y, 1, c->r), HK_STATUS_OK, "sdot", s,
                    st, why, len) ||
              check(c, c->blas->snrm2(c->h, N, c->x, 1, c->r + 1), HK_STATUS_OK, "snrm2", s, st,
                    why, len) ||
              check(c, c->vt->set_pointer_mode(c->h, HK_POINTER_MODE_HOST), HK_STATUS_OK,
                    "set_pointer_mode", s, st, why, len) ||
              check(c, c->blas->sdot(c->h, N, c->x, 1, c->x, 1, &host_result),
                    HK_STATUS_NOT_SUPPORTED, "host pointer mode sdot", s, st, why, len) ||
              check(c, c->vt->set_pointer_mode(c->h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK,
                    "set_pointer_mode", s, st, why, len);
    cudaError_t end = cudaStreamEndCapture(s, &g);
    if (bad)
        goto out;
    if (end != cudaSuccess || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
        snprintf(why, len, "cudaStreamEndCapture/cudaGraphInstantiate: %s",
                 cudaGetErrorString(end != cudaSuccess ? end : cudaGetLastError()));
        goto out;
    }
    for (int k = 1; k <= 2; k++) {
        float y[N], r[2];
        if (cudaGraphLaunch(ge, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess ||
            cudaMemcpy(y, c->y, sizeof y, cudaMemcpyDeviceToHost) != cudaSuccess ||
            cudaMemcpy(r, c->r, sizeof r, cudaMemcpyDeviceToHost) != cudaSuccess) {
            snprintf(why, len, "launch %d: %s", k, cudaGetErrorString(cudaGetLastError()));
            goto out;
        }
        double dot = 0.0, sq = 0.0;
        int wrong = 0;
        for (int i = 0; i < N; i++) {
            float want = c->hy[i] + 2.0f * (float)k * c->hx[i];
            wrong += y[i] != want;
            dot += (double)c->hx[i] * want;
            sq += (double)c->hx[i] * c->hx[i];
        }
        if (wrong || fabs(r[0] - dot) > 1e-4 * fabs(dot) + 1e-3 ||
            fabs(r[1] - sqrt(sq)) > 1e-5 * sqrt(sq)) {
            snprintf(why, len, "launch %d: %d of y wrong, dot %g (want %g), nrm2 %g (want %g)",
                     k, wrong, r[0], dot, r[1], sqrt(sq));
            goto out;
        }
    }
    rc = 0;
out:
    c->vt->set_stream(c->h, NULL);
    if (ge)
        cudaGraphExecDestroy(ge);
    if (g)
        cudaGraphDestroy(g);
    if (s)
        cudaStreamDestroy(s);
    return rc;
}

static void report(const char *name, int rc, const char *why)
{
    if (rc == 0) {
        printf("PASS %s\n", name);
        passed++;
    } else {
        printf("FAIL %s: %s\n", name, why);
        failed++;
    }
}

/* The plugin through the loader, a handle bound to the runtime's device 0. */
static int setup(client_t *c, const char *path, hk_loader_t **loader, char *why, size_t len)
{
    hk_plugin_t *p = NULL;
    const float alpha = 2.0f;
    if (hk_loader_create(NULL, loader) != HK_STATUS_OK ||
        hk_loader_open(*loader, path, &p) != HK_STATUS_OK) {
        snprintf(why, len, "loading %s: %s", path, *loader ? hk_loader_last_error(*loader) : "");
        return -1;
    }
    c->vt = hk_plugin_vtable(p);
    c->blas = hk_plugin_table(p, HK_TABLE_BLAS1_V1);
    for (int i = 0; i < N; i++) {
        c->hx[i] = (float)(i % 7) - 3.0f;
        c->hy[i] = (float)(i % 5);
    }
    if (!c->vt || !c->blas || c->vt->handle_create(NULL, &c->h) != HK_STATUS_OK) {
        snprintf(why, len, "handle_create: %s", c->vt ? c->vt->last_error(NULL) : "no vtable");
        return -1;
    }
    if (cudaMalloc((void **)&c->x, N * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&c->y, N * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&c->r, 2 * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&c->alpha, sizeof(float)) != cudaSuccess ||
        cudaMemcpy(c->x, c->hx, sizeof c->hx, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(c->alpha, &alpha, sizeof alpha, cudaMemcpyHostToDevice) != cudaSuccess ||
        c->vt->set_pointer_mode(c->h, HK_POINTER_MODE_DEVICE) != HK_STATUS_OK) {
        snprintf(why, len, "cudaMalloc/cudaMemcpy: %s", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static client_t c;
    static const struct {
        const char *name;
        capture_mode_t mode;
    } modes[] = {
        {"cudart program, stream set inside cudaStreamBeginCapture, global",
         cudaStreamCaptureModeGlobal},
        {"cudart program, stream set inside cudaStreamBeginCapture, thread-local",
         cudaStreamCaptureModeThreadLocal},
        {"cudart program, stream set inside cudaStreamBeginCapture, relaxed",
         cudaStreamCaptureModeRelaxed},
    };
    char why[1200] = "";
    hk_loader_t *loader = NULL;
    int count = 0;
    if (argc != 2) {
        fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
        return 2;
    }
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1 || cudaSetDevice(0) != cudaSuccess) {
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            printf("skipped: %s: no CUDA device for the runtime (%s)\n", modes[i].name,
                   e != cudaSuccess ? cudaGetErrorString(e) : "none listed");
        printf("0 passed, 0 failed, %zu skipped\n", sizeof modes / sizeof modes[0]);
        return 0;
    }
    int up = setup(&c, argv[1], &loader, why, sizeof why);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        report(modes[i].name, up == 0 ? capture_case(&c, modes[i].mode, why, sizeof why) : -1,
               why);
    if (c.h)
        c.vt->handle_destroy(c.h);
    cudaFree(c.x);
    cudaFree(c.y);
    cudaFree(c.r);
    cudaFree(c.alpha);
    if (loader)
        hk_loader_destroy(loader);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
