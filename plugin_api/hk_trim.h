/* handlekit table "hk.trim/1": giving back what a plugin keeps between
 * handles.
 *
 * A plugin may keep things after its last handle is destroyed, so that the
 * next create is cheap: hk-cuda keeps a retain of each primary context it
 * used, its kernel library (loaded into those contexts) and the memory a
 * destroyed handle leaves for the next one in the same context
 * (docs/contexts.md, "What the kit keeps between handles"). trim gives back
 * what no live handle uses; live handles keep theirs, and the next create
 * makes again what it needs.
 *
 * A host calls it before it closes the plugin's module: the loader does, in
 * a swap and when it closes a module, because the module's own unload runs
 * under the dynamic loader's lock, and these driver calls may wait there for
 * other threads' launches to pause (docs/contexts.md fact 30). A long-lived
 * host may also call it whenever it wants the memory and the contexts back.
 *
 * The table is the plugin's, not a handle's: it is found with the vtable's
 * get_table (hk_plugin_get_table), and movable handles do not forward it. */
#ifndef HK_TRIM_H
#define HK_TRIM_H

#include <stddef.h>

#include "hk_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_TABLE_TRIM_V1 "hk.trim/1"

/* X(name, ABI minor that added it, parameters, arguments); its one slot
 * takes no handle. */
#define HK_TRIM_V1_SLOTS(X) X(trim, 2, (void), ())

typedef struct hk_trim_v1 {
    size_t size; /* sizeof(hk_trim_v1_t) as the plugin was built */
    /* [thread-safe] Gives back what the plugin keeps between handles and no
     * live handle uses. Returns HK_STATUS_OK, or the status of the first
     * give-back the driver refused (twice), with the reason in
     * last_error(NULL); what was refused stays kept, for a later trim or
     * the module's unload. In a fork() child of a CUDA process it does
     * nothing and returns HK_STATUS_OK. */
    hk_status_t (*trim)(void);
} hk_trim_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* HK_TRIM_H */
