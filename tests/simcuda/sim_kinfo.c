/* simcuda kernels' parameters and dynamic shared memory (docs/contexts.md
 * facts 28 and 29).
 *
 * Parameters: cuKernelGetParamInfo and cuFuncGetParamInfo give each
 * parameter's offset and size, and CUDA_ERROR_INVALID_VALUE past the last.
 * The simulation knows them from the kernel's PTX text, else from the sizes
 * its emulation declares (SIMCUDA_EMULATION_ARGS); without either it answers
 * CUDA_ERROR_NOT_SUPPORTED. A launch reads one argument per parameter, as the
 * driver does: an array shorter than that is read past its end, and NULL for
 * a kernel that has parameters gives CUDA_ERROR_INVALID_VALUE.
 *
 * Dynamic shared memory: a launch may ask up to the kernel's
 * MAX_DYNAMIC_SHARED_SIZE_BYTES (48 KiB until cuKernelSetAttribute or
 * cuFuncSetAttribute raises it, to at most the device's opt-in maximum,
 * 227 KiB as on an H200); more gives CUDA_ERROR_INVALID_VALUE, and nothing
 * else changes. No kernel here has static shared memory. */
#include "sim_internal.h"

#include <stdlib.h>
#include <string.h>

static volatile unsigned char sim_arg_sink;

typedef struct sim_params {
    int state; /* 0: not looked up yet; 1: known; 2: unknown */
    unsigned n, off[SIMCUDA_EMU_MAX_PARAMS], size[SIMCUDA_EMU_MAX_PARAMS];
} sim_params_t;

struct sim_kinfo {
    sim_params_t params; /* a kernel's function uses the kernel's */
    /* 1 + the limit set (per device for a kernel; [0] for a function); 0: not set */
    int max_dynamic_shared[SIM_MAX_DEVICES];
};

static const sim_params_t unknown = {2, 0, {0}, {0}};

/* *slot, made on first use; NULL without memory. Taken from chunks of
 * their own, so that they do not sit between the objects, whose list some
 * calls walk. Never freed, as the objects are not. */
typedef struct sim_kinfo_chunk {
    struct sim_kinfo_chunk *older; /* every chunk stays reachable from the newest */
    struct sim_kinfo k[256];
} sim_kinfo_chunk_t;

static struct sim_kinfo *sim_kinfo(struct sim_kinfo **slot)
{
    static sim_kinfo_chunk_t *chunk;
    static unsigned used;
    if (*slot)
        return *slot;
    if (!chunk || used == sizeof chunk->k / sizeof chunk->k[0]) {
        sim_kinfo_chunk_t *c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        c->older = chunk;
        chunk = c;
        used = 0;
    }
    *slot = &chunk->k[used++];
    return *slot;
}

/* The parameters of name in image, looked up once into *p. */
static const sim_params_t *sim_params(const unsigned char *img, size_t size, const char *name,
                                      struct sim_kinfo *ki)
{
    if (!ki)
        return &unknown;
    sim_params_t *p = &ki->params;
    if (p->state)
        return p;
    p->state = 2;
    if (img && size && img[0] != 0x50 && img[0] != 0x7f && /* a fatbin's or an ELF's magic */
        sim_ptx_params(img, size, name, &p->n, p->off, p->size, SIMCUDA_EMU_MAX_PARAMS)) {
        p->state = 1;
        return p;
    }
    const simcuda_emu_entry_t *e = sim_emu_find(name);
    if (e && e->nparams) {
        unsigned off = 0;
        for (unsigned i = 0; i < e->nparams; i++) {
            unsigned al = e->param_size[i] >= 8 ? 8 : e->param_size[i] ? e->param_size[i] : 1;
            off = (off + al - 1) / al * al;
            p->off[i] = off;
            p->size[i] = e->param_size[i];
            off += e->param_size[i];
        }
        p->n = e->nparams;
        p->state = 1;
    }
    return p;
}

static const sim_params_t *sim_kernel_params(struct CUkern_st *k)
{
    return sim_params(k->lib->image, k->lib->image_size, k->name, sim_kinfo(&k->kinfo));
}

static const sim_params_t *sim_func_params(struct CUfunc_st *f)
{
    if (f->kernel)
        return sim_kernel_params(f->kernel);
    return sim_params(f->mod->image, f->mod->image_size, f->name, sim_kinfo(&f->kinfo));
}

static CUresult sim_param_info(const sim_params_t *p, size_t i, size_t *off, size_t *size)
{
    if (!off || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->state != 1)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (i >= p->n)
        return CUDA_ERROR_INVALID_VALUE;
    *off = p->off[i];
    *size = p->size[i];
    return CUDA_SUCCESS;
}

SIM_API CUresult cuKernelGetParamInfo(CUkernel k, size_t i, size_t *off, size_t *size)
{
    SIM_BEGIN(cuKernelGetParamInfo);
    SIM_FAIL_IF(!k || !sim_kernel_live(k), CUDA_ERROR_INVALID_HANDLE);
    SIM_CHECK(sim_param_info(sim_kernel_params(k), i, off, size));
    SIM_END;
}

SIM_API CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t *off, size_t *size)
{
    SIM_BEGIN(cuFuncGetParamInfo);
    SIM_FAIL_IF(!f || f->hdr.magic != SIM_MAGIC_FUNC || !sim_func_live(f),
                CUDA_ERROR_INVALID_HANDLE);
    SIM_CHECK(sim_param_info(sim_func_params(f), i, off, size));
    SIM_END;
}

/* ---- dynamic shared memory ---- */

int sim_kernel_max_dynamic_shared(struct CUkern_st *k, int device)
{
    int set = k->kinfo && device >= 0 && device < SIM_MAX_DEVICES
                  ? k->kinfo->max_dynamic_shared[device]
                  : 0;
    return set ? set - 1 : SIM_SHARED_DEFAULT;
}

static int sim_func_max_dynamic_shared(struct CUfunc_st *f, int device)
{
    if (f->kinfo && f->kinfo->max_dynamic_shared[0])
        return f->kinfo->max_dynamic_shared[0] - 1;
    return f->kernel ? sim_kernel_max_dynamic_shared(f->kernel, device) : SIM_SHARED_DEFAULT;
}

static CUresult sim_shared_value(CUfunction_attribute attrib, int value)
{
    if (attrib != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
        return CUDA_ERROR_NOT_SUPPORTED; /* the others are not modelled */
    return value < 0 || value > SIM_SHARED_OPTIN ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SIM_API CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int value, CUkernel k,
                                      CUdevice dev)
{
    SIM_BEGIN(cuKernelSetAttribute);
    SIM_FAIL_IF(!k || !sim_kernel_live(k), CUDA_ERROR_INVALID_HANDLE);
    SIM_FAIL_IF(dev < 0 || dev >= sim.ndev, CUDA_ERROR_INVALID_DEVICE);
    SIM_CHECK(sim_shared_value(attrib, value));
    SIM_FAIL_IF(!sim_kinfo(&k->kinfo), CUDA_ERROR_OUT_OF_MEMORY);
    k->kinfo->max_dynamic_shared[dev] = value + 1;
    SIM_END;
}

SIM_API CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute attrib, int value)
{
    SIM_BEGIN(cuFuncSetAttribute);
    SIM_FAIL_IF(!f || f->hdr.magic != SIM_MAGIC_FUNC || !sim_func_live(f),
                CUDA_ERROR_INVALID_HANDLE);
    SIM_CHECK(sim_shared_value(attrib, value));
    SIM_FAIL_IF(!sim_kinfo(&f->kinfo), CUDA_ERROR_OUT_OF_MEMORY);
    f->kinfo->max_dynamic_shared[0] = value + 1;
    SIM_END;
}

/* ---- launches ---- */

CUresult sim_launch_args(CUfunction f, int device, unsigned shared_bytes, void **params)
{
    const sim_params_t *p;
    int limit;
    if (((sim_obj_t *)f)->magic == SIM_MAGIC_KERNEL) {
        struct CUkern_st *k = (struct CUkern_st *)f;
        p = sim_kernel_params(k);
        limit = sim_kernel_max_dynamic_shared(k, device);
    } else {
        p = sim_func_params(f);
        limit = sim_func_max_dynamic_shared(f, device);
    }
    if (shared_bytes > (unsigned)limit)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->state != 1)
        return CUDA_SUCCESS;
    if (!params && p->n)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char acc = 0;
    for (unsigned i = 0; i < p->n; i++) {
        const unsigned char *v = params[i];
        for (unsigned b = 0; b < p->size[i]; b++)
            acc ^= v[b];
    }
    sim_arg_sink = acc;
    return CUDA_SUCCESS;
}
