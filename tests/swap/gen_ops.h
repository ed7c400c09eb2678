/* The table of the test double gen (gen_plugin.c): a handle library whose
 * only ops are its own. */
#ifndef GEN_OPS_H
#define GEN_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "hk_abi.h"

#define GEN_TABLE_OPS_V1 "gen.ops/1"

typedef struct gen_ops_v1 {
    size_t size;
    /* [handle-safe] *out = a + b. */
    hk_status_t (*add)(hk_handle_t *h, int64_t a, int64_t b, int64_t *out);
    /* [handle-safe] *out = which build this is (GEN_TAG). */
    hk_status_t (*tag)(hk_handle_t *h, int *out);
    /* [handle-safe] *out = a * b; added later: builds without it end before. */
    hk_status_t (*mul)(hk_handle_t *h, int64_t a, int64_t b, int64_t *out);
} gen_ops_v1_t;

#endif
