/* simcuda modules and libraries (docs/contexts.md facts 4, 8, 14).
 *
 * A module is loaded into the current context and its functions are bound to
 * that context (and to its ID: a reset primary does not bring them back). A
 * library is context-independent; its kernels get one CUfunction per context
 * they are used in, made on first use ("lazy loading"). Images are read as
 * the driver reads them (sim_image.c) and copied; a kernel exists when its name occurs in the
 * image as a whole word, which holds for the symbol and string tables of a
 * fatbin's cubins and for PTX text.
 *
 * JIT: nothing is compiled, but PTX text containing the marker "syntax error"
 * fails as the real JIT compiler fails (CUDA_ERROR_INVALID_PTX), with an
 * error log in the CU_JIT_ERROR_LOG_BUFFER the caller gave, whose size option
 * is set to the bytes written; an info log given is left empty. */
#include "sim_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_FATBIN_MAGIC 0xBA55ED50u

static uint32_t sim_le32(const unsigned char *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int sim_ident(int c)
{
    return isalnum(c) || c == '_' || c == '$';
}

int sim_image_has_name(const unsigned char *img, size_t size, const char *name)
{
    size_t n = strlen(name);
    if (n == 0)
        return 0;
    const unsigned char *p = img, *end = img + size;
    while (p < end) {
        const unsigned char *hit = memmem(p, (size_t)(end - p), name, n);
        if (!hit)
            return 0;
        int before = hit > img ? hit[-1] : 0;
        int after = hit + n < end ? hit[n] : 0;
        if (!sim_ident(before) && !sim_ident(after) && before != '.')
            return 1;
        p = hit + 1;
    }
    return 0;
}

static CUresult sim_image_copy(const void *image, unsigned char **out, size_t *size)
{
    CUresult r = sim_image_read(image, size);
    if (r != CUDA_SUCCESS)
        return r;
    *out = malloc(*size);
    if (!*out)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(*out, image, *size);
    return CUDA_SUCCESS;
}

/* Writes text to a caller's JIT log buffer of *size bytes (NUL included)
 * and sets *size to the bytes written, as the driver does. */
static void sim_jit_log(char *buf, void **size_val, const char *text)
{
    size_t cap = (size_t)(uintptr_t)*size_val;
    if (!buf || cap == 0)
        return;
    size_t n = strlen(text);
    if (n > cap - 1)
        n = cap - 1;
    memcpy(buf, text, n);
    buf[n] = '\0';
    *size_val = (void *)(uintptr_t)(n + 1);
}

/* The simulated JIT compiler: PTX with the marker fails with a log naming
 * its line; everything else "compiles". */
static CUresult sim_jit(const void *image, unsigned nopt, const CUjit_option *opts, void **vals)
{
    const char *text = image;
    size_t size = 0;
    int ptx = sim_le32(image) != SIM_FATBIN_MAGIC && memcmp(image, "\177ELF", 4) != 0 &&
              sim_image_read(image, &size) == CUDA_SUCCESS;
    const char *hit = ptx ? strstr(text, "syntax error") : NULL;
    char *err = NULL, *info = NULL;
    void **err_size = NULL, **info_size = NULL;
    for (unsigned i = 0; opts && vals && i < nopt; i++) {
        if (opts[i] == CU_JIT_ERROR_LOG_BUFFER)
            err = vals[i];
        else if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            err_size = &vals[i];
        else if (opts[i] == CU_JIT_INFO_LOG_BUFFER)
            info = vals[i];
        else if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
            info_size = &vals[i];
    }
    if (info && info_size)
        sim_jit_log(info, info_size, "");
    if (!hit)
        return CUDA_SUCCESS;
    int line = 1;
    for (const char *p = text; p < hit; p++)
        line += *p == '\n';
    char log[160];
    snprintf(log, sizeof log, "ptxas application ptx input, line %d; error   : syntax error "
             "(simulated JIT)\nptxas fatal   : Ptx assembly aborted due to errors", line);
    if (err && err_size)
        sim_jit_log(err, err_size, log);
    return CUDA_ERROR_INVALID_PTX;
}

static CUresult sim_module_load(CUmodule *out, const void *image)
{
    struct CUctx_st *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    sim_quiet_wait(c); /* fact 25: loading code into c waits for a pause in its launches */
    r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUmod_st *m = sim_obj_new(SIM_MAGIC_MODULE, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    unsigned char *copy;
    r = sim_image_copy(image, &copy, &m->image_size);
    if (r != CUDA_SUCCESS)
        return r;
    m->hdr.owned = copy;
    m->image = copy;
    m->own = sim_owner_of(c);
    m->alive = 1;
    *out = m;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuModuleLoadData(CUmodule *out, const void *image)
{
    SIM_BEGIN(cuModuleLoadData);
    SIM_FAIL_IF(!image, CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK(sim_jit(image, 0, NULL, NULL));
    SIM_CHECK(sim_module_load(out, image));
    (void)sim_capture_forbid(); /* loaded, but a capture that forbids it is invalidated */
    SIM_END;
}

SIM_API CUresult cuModuleLoadDataEx(CUmodule *out, const void *image, unsigned int nopt,
                                    CUjit_option *opts, void **vals)
{
    SIM_BEGIN(cuModuleLoadDataEx);
    SIM_FAIL_IF(!image, CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK(sim_jit(image, nopt, opts, vals));
    SIM_CHECK(sim_module_load(out, image));
    (void)sim_capture_forbid(); /* loaded, but a capture that forbids it is invalidated */
    SIM_END;
}

static int sim_module_live(const struct CUmod_st *m)
{
    return m && m->hdr.magic == SIM_MAGIC_MODULE && m->alive && sim_owner_valid(&m->own) &&
           (!m->lib || m->lib->alive);
}

SIM_API CUresult cuModuleUnload(CUmodule m)
{
    SIM_BEGIN(cuModuleUnload);
    SIM_FAIL_IF(!sim_module_live(m) || m->lib, CUDA_ERROR_INVALID_HANDLE);
    sim_quiet_wait(m->own.ctx); /* fact 30 (quiet model only) */
    SIM_FAIL_IF(!sim_module_live(m), CUDA_ERROR_INVALID_HANDLE); /* unloaded meanwhile */
    m->alive = 0;
    SIM_END;
}

static struct CUfunc_st *sim_func_new(const char *name, sim_owner_t own)
{
    struct CUfunc_st *f = sim_obj_new(SIM_MAGIC_FUNC, sizeof *f);
    if (!f)
        return NULL;
    f->name = name;
    f->own = own;
    return f;
}

SIM_API CUresult cuModuleGetFunction(CUfunction *out, CUmodule m, const char *name)
{
    SIM_BEGIN(cuModuleGetFunction);
    SIM_FAIL_IF(!out || !name, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(!sim_module_live(m), CUDA_ERROR_INVALID_HANDLE);
    for (struct CUfunc_st *f = m->funcs; f; f = f->next)
        if (strcmp(f->name, name) == 0) {
            *out = f;
            goto out;
        }
    SIM_FAIL_IF(!sim_image_has_name(m->image, m->image_size, name), CUDA_ERROR_NOT_FOUND);
    char *copy = strdup(name);
    SIM_FAIL_IF(!copy, CUDA_ERROR_OUT_OF_MEMORY);
    struct CUfunc_st *f = sim_func_new(copy, m->own);
    if (!f)
        free(copy);
    SIM_FAIL_IF(!f, CUDA_ERROR_OUT_OF_MEMORY);
    f->hdr.owned = copy;
    f->mod = m;
    f->next = m->funcs;
    m->funcs = f;
    *out = f;
    SIM_END;
}

SIM_API CUresult cuLibraryLoadData(CUlibrary *out, const void *code, CUjit_option *jit_opts,
                                   void **jit_vals, unsigned int njit,
                                   CUlibraryOption *lib_opts, void **lib_vals, unsigned int nlib)
{
    SIM_BEGIN(cuLibraryLoadData);
    (void)lib_opts, (void)lib_vals, (void)nlib;
    SIM_FAIL_IF(!out || !code, CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK(sim_jit(code, njit, jit_opts, jit_vals));
    struct CUlib_st *l = sim_obj_new(SIM_MAGIC_LIB, sizeof *l);
    SIM_FAIL_IF(!l, CUDA_ERROR_OUT_OF_MEMORY);
    unsigned char *copy;
    SIM_CHECK(sim_image_copy(code, &copy, &l->image_size));
    l->hdr.owned = copy;
    l->image = copy;
    l->alive = 1;
    *out = l;
    (void)sim_capture_forbid(); /* loaded, but a capture that forbids it is invalidated */
    SIM_END;
}

static int sim_lib_live(const struct CUlib_st *l)
{
    return l && l->hdr.magic == SIM_MAGIC_LIB && l->alive;
}

SIM_API CUresult cuLibraryUnload(CUlibrary l)
{
    SIM_BEGIN(cuLibraryUnload);
    SIM_FAIL_IF(!sim_lib_live(l), CUDA_ERROR_INVALID_HANDLE);
    SIM_CHECK(sim_capture_forbid()); /* fact 26: an unsafe call during capture */
    /* Fact 19: the unload waits for its running kernels (launches held by
     * simcuda_hold_launches), with sim.lock released, so that every other
     * driver call goes on meanwhile. */
    while (l->running) {
        sim.unload_waiting++;
        pthread_cond_wait(&sim.held_done, &sim.lock);
        sim.unload_waiting--;
    }
    SIM_FAIL_IF(!sim_lib_live(l), CUDA_ERROR_INVALID_HANDLE); /* unloaded meanwhile */
    /* Fact 30: taking its code out of the contexts it is loaded in waits for
     * a pause in a service there (quiet model only). */
    sim_quiet_wait_lib(l);
    SIM_FAIL_IF(!sim_lib_live(l), CUDA_ERROR_INVALID_HANDLE);
    l->alive = 0; /* fact 14: its kernels and their functions die with it */
    SIM_END;
}

SIM_API CUresult cuLibraryGetKernel(CUkernel *out, CUlibrary l, const char *name)
{
    SIM_BEGIN(cuLibraryGetKernel);
    SIM_FAIL_IF(!out || !name, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(!sim_lib_live(l), CUDA_ERROR_INVALID_HANDLE);
    for (struct CUkern_st *k = l->kernels; k; k = k->next)
        if (strcmp(k->name, name) == 0) {
            *out = k;
            goto out;
        }
    SIM_FAIL_IF(!sim_image_has_name(l->image, l->image_size, name), CUDA_ERROR_NOT_FOUND);
    struct CUkern_st *k = sim_obj_new(SIM_MAGIC_KERNEL, sizeof *k);
    SIM_FAIL_IF(!k, CUDA_ERROR_OUT_OF_MEMORY);
    char *copy = strdup(name);
    SIM_FAIL_IF(!copy, CUDA_ERROR_OUT_OF_MEMORY);
    k->hdr.owned = copy;
    k->name = copy;
    k->lib = l;
    k->next = l->kernels;
    l->kernels = k;
    *out = k;
    SIM_END;
}

static struct CUmod_st *sim_lib_find_module(const struct CUlib_st *l, const struct CUctx_st *c)
{
    for (struct CUmod_st *m = l->modules; m; m = m->next_in_lib)
        if (m->own.ctx == c && m->own.ctx_id == c->id)
            return m;
    return NULL;
}

int sim_lib_loaded(const struct CUlib_st *l, const struct CUctx_st *c)
{
    return sim_lib_find_module(l, c) != NULL;
}

/* The library's module in context c, made on first use. */
static CUresult sim_lib_module(struct CUlib_st *l, struct CUctx_st *c, struct CUmod_st **out)
{
    *out = sim_lib_find_module(l, c);
    if (*out)
        return CUDA_SUCCESS;
    struct CUmod_st *m = sim_obj_new(SIM_MAGIC_MODULE, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->own = sim_owner_of(c);
    m->alive = 1;
    m->image = l->image;
    m->image_size = l->image_size;
    m->lib = l;
    m->next_in_lib = l->modules;
    l->modules = m;
    *out = m;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuLibraryGetModule(CUmodule *out, CUlibrary l)
{
    SIM_BEGIN(cuLibraryGetModule);
    SIM_FAIL_IF(!out, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(!sim_lib_live(l), CUDA_ERROR_INVALID_HANDLE);
    struct CUctx_st *c;
    SIM_CHECK(sim_current(&c));
    if (!sim_lib_loaded(l, c)) { /* fact 25: the library's first load into c */
        sim_quiet_wait(c);
        SIM_FAIL_IF(!sim_lib_live(l), CUDA_ERROR_INVALID_HANDLE); /* unloaded meanwhile */
        SIM_CHECK(sim_current(&c));
    }
    SIM_CHECK(sim_lib_module(l, c, out));
    SIM_END;
}

int sim_kernel_live(const struct CUkern_st *k)
{
    return k->hdr.magic == SIM_MAGIC_KERNEL && sim_lib_live(k->lib);
}

/* The kernel's function in context c (lazy loading). */
CUresult sim_kernel_function(struct CUkern_st *k, struct CUctx_st *c, struct CUfunc_st **out)
{
    for (struct CUfunc_st *f = k->funcs; f; f = f->next)
        if (f->own.ctx == c && f->own.ctx_id == c->id) {
            *out = f;
            return CUDA_SUCCESS;
        }
    struct CUmod_st *m;
    CUresult r = sim_lib_module(k->lib, c, &m);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUfunc_st *f = sim_func_new(k->name, sim_owner_of(c));
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    f->mod = m;
    f->kernel = k;
    f->next = k->funcs;
    k->funcs = f;
    *out = f;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuKernelGetFunction(CUfunction *out, CUkernel k)
{
    SIM_BEGIN(cuKernelGetFunction);
    SIM_FAIL_IF(!out, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(!k || !sim_kernel_live(k), CUDA_ERROR_INVALID_HANDLE);
    struct CUctx_st *c;
    SIM_CHECK(sim_current(&c));
    if (!sim_lib_loaded(k->lib, c)) {
        /* Fact 25: the kernel's first load into c (lazy loading) waits for a
         * pause in c's launches; the library or c may have died meanwhile. */
        sim_quiet_wait(c);
        SIM_FAIL_IF(!sim_kernel_live(k), CUDA_ERROR_INVALID_HANDLE);
        SIM_CHECK(sim_current(&c));
    }
    SIM_CHECK(sim_kernel_function(k, c, out));
    SIM_END;
}

/* H200-like answers for every kernel: the simulation has no compiled code. */
SIM_API CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel k,
                                      CUdevice dev)
{
    SIM_BEGIN(cuKernelGetAttribute);
    SIM_FAIL_IF(!pi || attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(!k || !sim_kernel_live(k), CUDA_ERROR_INVALID_HANDLE);
    SIM_FAIL_IF(dev < 0 || dev >= sim.ndev, CUDA_ERROR_INVALID_DEVICE);
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 16; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *pi = sim_kernel_max_dynamic_shared(k, dev);
        break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
    default: *pi = 0; /* no static shared, constant or local memory */
    }
    SIM_END;
}

SIM_API CUresult cuKernelGetName(const char **name, CUkernel k)
{
    SIM_BEGIN(cuKernelGetName);
    SIM_FAIL_IF(!name, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(!k || !sim_kernel_live(k), CUDA_ERROR_INVALID_HANDLE);
    *name = k->name;
    SIM_END;
}

int sim_func_live(const struct CUfunc_st *f)
{
    return f->hdr.magic == SIM_MAGIC_FUNC && sim_owner_valid(&f->own) && sim_module_live(f->mod);
}

SIM_API CUresult cuFuncGetName(const char **name, CUfunction f)
{
    SIM_BEGIN(cuFuncGetName);
    SIM_FAIL_IF(!name, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(!f || !sim_func_live(f), CUDA_ERROR_INVALID_HANDLE);
    *name = f->name;
    SIM_END;
}

SIM_API size_t simcuda_live_libraries(void)
{
    pthread_mutex_lock(&sim.lock);
    size_t n = 0;
    for (const sim_obj_t *o = sim.objects; o; o = o->next_obj)
        n += o->magic == SIM_MAGIC_LIB && ((const struct CUlib_st *)o)->alive;
    pthread_mutex_unlock(&sim.lock);
    return n;
}
