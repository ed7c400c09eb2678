/* simcuda kernel launches: handle and context checks with the driver's codes
 * (docs/contexts.md facts 4, 5, 8, 14), the emulation registry, and the launch log.
 * A launch on a stream of another context runs in that context, as on the
 * real driver (a CUfunction must then belong to the stream's context).
 * A launch first completes what stream order puts before it; then an
 * emulation of the whole grid runs at once on the calling thread, and a
 * block-by-block emulation starts its grid (sim_exec.c). Emulations come from
 * the "simcuda_emu" section (files in emu/) or from test programs, registered at
 * run time (simcuda_emu_register), which take precedence. */
#include "sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds of the "simcuda_emu" section, provided by the linker. */
extern const simcuda_emu_entry_t __start_simcuda_emu[] __attribute__((weak, visibility("hidden")));
extern const simcuda_emu_entry_t __stop_simcuda_emu[] __attribute__((weak, visibility("hidden")));

/* Emulations registered at run time (simcuda_emu_register), newest first.
 * Never freed: a captured graph may point at one. Under sim.lock. */
typedef struct sim_emu_reg {
    simcuda_emu_entry_t entry;
    struct sim_emu_reg *next;
} sim_emu_reg_t;
static sim_emu_reg_t *registered;

SIM_API int simcuda_emu_register(const simcuda_emu_entry_t *e)
{
    if (!e || !e->name || !e->name[0] || (!e->fn && (!e->check || !e->block)) ||
        e->nparams > SIMCUDA_EMU_MAX_PARAMS)
        return -1;
    sim_emu_reg_t *r = calloc(1, sizeof *r);
    char *name = strdup(e->name);
    if (!r || !name) {
        free(r);
        free(name);
        return -1;
    }
    r->entry = *e;
    r->entry.name = name;
    pthread_mutex_lock(&sim.lock);
    r->next = registered;
    registered = r;
    pthread_mutex_unlock(&sim.lock);
    return 0;
}

const simcuda_emu_entry_t *sim_emu_find(const char *name)
{
    for (const sim_emu_reg_t *r = registered; r; r = r->next)
        if (strcmp(r->entry.name, name) == 0)
            return &r->entry;
    for (const simcuda_emu_entry_t *e = __start_simcuda_emu; e && e < __stop_simcuda_emu; e++)
        if (strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

static void sim_log(const char *name, struct CUctx_st *ctx, CUstream stream, CUresult result)
{
    if (sim.nlog == sim.cap_log) {
        size_t cap = sim.cap_log ? 2 * sim.cap_log : 256;
        simcuda_launch_record_t *grown = realloc(sim.log, cap * sizeof *grown);
        if (!grown)
            return; /* the log is best effort; the launch itself is not affected */
        sim.log = grown;
        sim.cap_log = cap;
    }
    simcuda_launch_record_t *rec = &sim.log[sim.nlog++];
    memset(rec, 0, sizeof *rec);
    snprintf(rec->name, sizeof rec->name, "%s", name);
    rec->ctx = ctx;
    rec->ctx_id = ctx->id;
    rec->device = ctx->device;
    rec->stream = stream;
    rec->result = result;
}

void sim_log_free(void)
{
    free(sim.log);
    sim.log = NULL;
    sim.nlog = sim.cap_log = 0;
}

CUresult sim_run(const simcuda_emu_entry_t *emu, const char *name, struct CUctx_st *ctx,
                 CUstream stream, const unsigned grid[3], const unsigned block[3],
                 unsigned shared_bytes, void **params)
{
    CUresult r;
    if (!emu) {
        /* Loud on purpose: a test that launches an unemulated kernel is wrong. */
        fprintf(stderr, "simcuda: no emulation for kernel %s\n", name);
        r = CUDA_ERROR_NOT_FOUND;
    } else {
        simcuda_launch_t l = {.kernel_name = name,
                              .grid = {grid[0], grid[1], grid[2]},
                              .block = {block[0], block[1], block[2]},
                              .shared_bytes = shared_bytes,
                              .ctx = ctx,
                              .stream = stream,
                              .device = ctx->device};
        if (emu->block) {
            r = emu->check(&l, params);
            for (unsigned b = 0; r == CUDA_SUCCESS && b < grid[0]; b++)
                emu->block(&l, params, b);
        } else {
            r = emu->fn(&l, params);
        }
    }
    sim_log(name, ctx, stream, r);
    return r;
}

/* Fact 25: a CUkernel's first launch in a context loads its library there,
 * and so waits, as cuKernelGetFunction does, for a pause in that context's
 * launches (only when the quiet-load model is on). The launch checks
 * everything again afterwards. */
static void sim_launch_wait_load(CUfunction f, CUstream hstream)
{
    struct CUctx_st *c = NULL;
    struct CUstream_st *s;
    if (!sim.quiet_us || !f || ((sim_obj_t *)f)->magic != SIM_MAGIC_KERNEL)
        return;
    struct CUkern_st *k = (struct CUkern_st *)f;
    if (sim_kernel_live(k) && sim_stream_target(hstream, &c, &s) == CUDA_SUCCESS &&
        !sim_lib_loaded(k->lib, c))
        sim_quiet_wait(c);
}

static CUresult sim_launch_checked(CUfunction f, const unsigned grid[3], const unsigned block[3],
                                   unsigned shared_bytes, CUstream hstream, void **params,
                                   void **extra)
{
    /* The launch runs in the stream's context (fact 5 as measured), and needs
     * a usable current context: 201 none, 709 a dead or reset one (fact 8). */
    struct CUctx_st *c = NULL;
    struct CUstream_st *s;
    sim_launch_wait_load(f, hstream);
    CUresult r = sim_stream_target(hstream, &c, &s);
    sim_quiet_note_launch(c); /* attempted launches count too (fact 25) */
    if (r != CUDA_SUCCESS)
        return r;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    const char *name;
    struct CUlib_st *lib = NULL; /* the library of the kernel, if it came from one */
    if (((sim_obj_t *)f)->magic == SIM_MAGIC_KERNEL) {
        /* fact 4: a CUkernel runs in any context, loaded there on first use */
        struct CUkern_st *k = (struct CUkern_st *)f;
        struct CUfunc_st *fn;
        if (!sim_kernel_live(k))
            return CUDA_ERROR_INVALID_HANDLE; /* fact 14 */
        r = sim_kernel_function(k, c, &fn);
        if (r != CUDA_SUCCESS)
            return r;
        name = k->name;
        lib = k->lib;
    } else {
        if (f->hdr.magic != SIM_MAGIC_FUNC || !sim_func_live(f) || f->own.ctx != c)
            return CUDA_ERROR_INVALID_HANDLE; /* facts 4, 8, 14 */
        name = f->name;
        lib = f->kernel ? f->kernel->lib : NULL;
    }
    if (extra)
        return CUDA_ERROR_NOT_SUPPORTED; /* packed argument buffers are not modelled */
    for (int i = 0; i < 3; i++)
        if (grid[i] == 0 || block[i] == 0)
            return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned long long)block[0] * block[1] * block[2] > 1024 || block[2] > 64)
        return CUDA_ERROR_INVALID_VALUE;
    r = sim_launch_args(f, c->device, shared_bytes, params); /* facts 28, 29 */
    if (r != CUDA_SUCCESS)
        return r;
    r = sim_capture_legacy(c, s);
    if (r != CUDA_SUCCESS)
        return r;
    const simcuda_emu_entry_t *emu = sim_emu_find(name);
    if (s->capturing)
        return sim_capture_launch(s, emu, name, grid, block, shared_bytes, params);
    if (emu && emu->block) {
        r = sim_exec_launch(emu, name, c, s, hstream, grid, block, shared_bytes, params);
        sim_log(name, c, hstream, r);
    } else {
        sim_exec_order(s);
        r = sim_run(emu, name, c, hstream, grid, block, shared_bytes, params);
    }
    if (r == CUDA_SUCCESS && lib && sim.hold_next > 0) { /* simcuda_hold_launches */
        sim.hold_next--;
        lib->running++;
        c->held++;
        s->held++;
    }
    return r;
}

SIM_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                unsigned int bx, unsigned int by, unsigned int bz,
                                unsigned int shared_bytes, CUstream stream, void **params,
                                void **extra)
{
    SIM_BEGIN(cuLaunchKernel);
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    SIM_CHECK(sim_launch_checked(f, grid, block, shared_bytes, stream, params, extra));
    SIM_END;
}

/* The launch attributes a library may pass: programmatic stream
 * serialization only (the simulation runs the grids in stream order, which
 * is what kernels that wait for their predecessor see anyway). */
SIM_API CUresult cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params,
                                  void **extra)
{
    SIM_BEGIN(cuLaunchKernelEx);
    SIM_FAIL_IF(!cfg, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(cfg->numAttrs && !cfg->attrs, CUDA_ERROR_INVALID_VALUE);
    for (unsigned i = 0; i < cfg->numAttrs; i++)
        SIM_FAIL_IF(cfg->attrs[i].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ||
                        cfg->attrs[i].value.programmaticStreamSerializationAllowed > 1,
                    CUDA_ERROR_NOT_SUPPORTED);
    const unsigned grid[3] = {cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ};
    const unsigned block[3] = {cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ};
    SIM_CHECK(sim_launch_checked(f, grid, block, cfg->sharedMemBytes, cfg->hStream, params,
                                 extra));
    SIM_END;
}

/* ---- launches held running (docs/contexts.md fact 19) ---- */

SIM_API void simcuda_hold_launches(unsigned n)
{
    pthread_mutex_lock(&sim.lock);
    sim.hold_next = n;
    pthread_mutex_unlock(&sim.lock);
}

SIM_API void simcuda_finish_launches(void)
{
    pthread_mutex_lock(&sim.lock);
    sim.hold_next = 0;
    for (sim_obj_t *o = sim.objects; o; o = o->next_obj) {
        if (o->magic == SIM_MAGIC_LIB)
            ((struct CUlib_st *)o)->running = 0;
        else if (o->magic == SIM_MAGIC_CTX)
            ((struct CUctx_st *)o)->held = 0;
        else if (o->magic == SIM_MAGIC_STREAM)
            ((struct CUstream_st *)o)->held = 0;
    }
    pthread_cond_broadcast(&sim.held_done);
    pthread_mutex_unlock(&sim.lock);
}

SIM_API unsigned simcuda_unloads_waiting(void)
{
    pthread_mutex_lock(&sim.lock);
    unsigned n = sim.unload_waiting;
    pthread_mutex_unlock(&sim.lock);
    return n;
}

SIM_API unsigned simcuda_syncs_waiting(void)
{
    pthread_mutex_lock(&sim.lock);
    unsigned n = sim.sync_waiting;
    pthread_mutex_unlock(&sim.lock);
    return n;
}

SIM_API size_t simcuda_launch_count(void)
{
    pthread_mutex_lock(&sim.lock);
    size_t n = sim.nlog;
    pthread_mutex_unlock(&sim.lock);
    return n;
}

SIM_API int simcuda_launch_get(size_t i, simcuda_launch_record_t *out)
{
    int rc = -1;
    pthread_mutex_lock(&sim.lock);
    if (out && i < sim.nlog) {
        *out = sim.log[i];
        rc = 0;
    }
    pthread_mutex_unlock(&sim.lock);
    return rc;
}
