/* simcuda: host emulations of device kernels.
 *
 * The simulated driver runs no device code. A launch of a kernel named K runs
 * the emulation registered under K, which computes what the whole grid would
 * compute, with the kernel's real argument layout: params[i] points to the i-th
 * argument exactly as given to cuLaunchKernel. Device memory is host memory
 * underneath, so device pointers can be dereferenced directly after checking.
 *
 * Register an emulation in any source file linked into the simulated driver
 * (a .c file in tests/simcuda/emu/):
 *
 *     static CUresult emu_probe(const simcuda_launch_t *l, void **params) {...}
 *     SIMCUDA_EMULATION(hk_probe_kernel, emu_probe);
 *
 * Entries land in the ELF section "simcuda_emu"; the driver walks it, so no
 * registration call and no constructor are needed.
 *
 * A test program with kernels of its own registers their emulations at run
 * time instead, with simcuda_emu_register (exported by the simulated driver;
 * a program that also runs on a real driver finds it with
 * dlsym(RTLD_DEFAULT, "simcuda_emu_register")). */
#ifndef SIMCUDA_EMU_H
#define SIMCUDA_EMU_H

#include <cuda.h>
#include <stddef.h>

typedef struct simcuda_launch {
    const char *kernel_name;
    unsigned grid[3];
    unsigned block[3];
    unsigned shared_bytes;
    CUcontext ctx;   /* the context the launch runs in */
    CUstream stream; /* as given (NULL, legacy, per-thread or a stream) */
    int device;      /* ordinal of ctx's device */
} simcuda_launch_t;

typedef CUresult (*simcuda_emu_fn)(const simcuda_launch_t *launch, void **params);

/* Block-by-block emulation (SIMCUDA_EMULATION_BLOCKS): check validates the
 * launch and its pointers before anything runs (its result is the launch's);
 * block then runs block b of the grid, once for each b in [0, grid[0]), in an
 * order the simulation chooses, possibly interleaved with the blocks of
 * launches on other streams and after the launch returned. block must keep
 * everything that outlives one block in device memory, as a kernel does. */
typedef CUresult (*simcuda_emu_check_fn)(const simcuda_launch_t *launch, void **params);
typedef void (*simcuda_emu_block_fn)(const simcuda_launch_t *launch, void **params, unsigned b);

#define SIMCUDA_EMU_MAX_PARAMS 16

typedef struct simcuda_emu_entry {
    const char *name;
    simcuda_emu_fn fn;
    /* Sizes of the kernel's parameters, in order; nparams = 0 when not given.
     * Only stream capture needs them: a captured launch must copy its argument
     * values, since the caller's storage is gone when the graph is replayed. */
    unsigned nparams;
    unsigned param_size[SIMCUDA_EMU_MAX_PARAMS];
    simcuda_emu_check_fn check; /* both set for a block-by-block emulation, else NULL */
    simcuda_emu_block_fn block;
} simcuda_emu_entry_t;

#define SIMCUDA_EMULATION(kernel, fn)                                                  \
    static const simcuda_emu_entry_t simcuda__emu_entry_##kernel                       \
        __attribute__((used, section("simcuda_emu"), aligned(sizeof(void *)))) = {     \
            #kernel, fn, 0, {0}, NULL, NULL}

/* Like SIMCUDA_EMULATION, and also gives the size of each kernel parameter, e.g.
 *     SIMCUDA_EMULATION_ARGS(hk_probe_kernel, emu_probe, sizeof(unsigned *), sizeof(unsigned));
 * Launches of the kernel can then be captured into a graph (cuStreamBeginCapture);
 * a kernel registered without sizes fails capture with CUDA_ERROR_NOT_SUPPORTED. */
#define SIMCUDA_EMULATION_ARGS(kernel, fn, ...)                                        \
    static const simcuda_emu_entry_t simcuda__emu_entry_##kernel                       \
        __attribute__((used, section("simcuda_emu"), aligned(sizeof(void *)))) = {     \
            #kernel, fn, sizeof((unsigned[]){__VA_ARGS__}) / sizeof(unsigned),          \
            {__VA_ARGS__}, NULL, NULL}

/* A kernel emulated block by block, with the sizes of its parameters (the
 * simulation keeps copies of the argument values while blocks are pending):
 *     SIMCUDA_EMULATION_BLOCKS(hk_sdot_kernel, check_dot, dot_block, sizeof(long long), ...);
 * Launches on one stream still run in order; launches on different streams of
 * one device run their blocks interleaved, so that two launches sharing
 * scratch memory race as they would on a GPU. */
#define SIMCUDA_EMULATION_BLOCKS(kernel, check_fn, block_fn, ...)                      \
    static const simcuda_emu_entry_t simcuda__emu_entry_##kernel                       \
        __attribute__((used, section("simcuda_emu"), aligned(sizeof(void *)))) = {     \
            #kernel, NULL, sizeof((unsigned[]){__VA_ARGS__}) / sizeof(unsigned),        \
            {__VA_ARGS__}, check_fn, block_fn}

/* [thread-safe] Registers an emulation at run time. e is copied (its name
 * too); the functions must stay valid for the life of the process. It
 * replaces any emulation of the same name, from the section or registered
 * before. Returns 0, or -1 for a NULL entry or name, neither fn nor both
 * check and block, more than SIMCUDA_EMU_MAX_PARAMS parameters, or no memory.
 * Fill the entry with SIMCUDA_EMU_ENTRY(name, fn, sizes...) below. */
int simcuda_emu_register(const simcuda_emu_entry_t *e);
typedef int (*simcuda_emu_register_fn)(const simcuda_emu_entry_t *e);

/* An entry value for simcuda_emu_register: name (a string), fn, and the size
 * of each kernel parameter (needed for stream capture), e.g.
 *     simcuda_emu_entry_t e = SIMCUDA_EMU_ENTRY("my_kernel", emu_my, sizeof(float *));  */
#define SIMCUDA_EMU_ENTRY(name, fn, ...)                                               \
    ((simcuda_emu_entry_t){name, fn, sizeof((unsigned[]){__VA_ARGS__}) / sizeof(unsigned), \
                           {__VA_ARGS__}, NULL, NULL})

/* For emulations: CUDA_SUCCESS when [ptr, ptr+bytes) lies inside one live
 * allocation of launch->device; CUDA_ERROR_ILLEGAL_ADDRESS otherwise (memory of
 * another device, freed memory, a host pointer), which the launch returns.
 * Exported: an emulation registered by a test program may call it (through
 * dlsym on a program that also runs on a real driver). */
CUresult simcuda_emu_check(const simcuda_launch_t *launch, const void *ptr, size_t bytes);

#endif /* SIMCUDA_EMU_H */
