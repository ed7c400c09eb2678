/* hk-cpu tests: what the test files share (test_cpu.c opens the plugin). */
#ifndef TCPU_H
#define TCPU_H

#include "hk_blas1.h"
#include "hk_memory.h"

/* The plugin as the suites see it: set by tcpu_open, cleared by tcpu_close. */
extern const hk_vtable_t *vt;
extern const hk_blas1_v1_t *blas;
extern const hk_memory_v1_t *mem;

/* Suite init and cleanup: opens hk-cpu.so and negotiates the current ABI. */
int tcpu_open(void);
int tcpu_close(void);

/* Opens another loaded copy of hk-cpu (the same file copied elsewhere, so
 * the dynamic loader maps it again). Returns its module or NULL. */
void *tcpu_open_copy(const hk_vtable_t **vt2, const hk_blas1_v1_t **blas2,
                     const hk_memory_v1_t **mem2);
void tcpu_close_copy(void *module);

/* Registration of the other test files. */
void tcpu_register_rules(void);
void tcpu_register_threads(void);

#endif /* TCPU_H */
