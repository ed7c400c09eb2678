/* The table every loader test plugin serves, so a test can ask a loaded
 * module which build it is and whether its data is its own. */
#ifndef TP_INFO_H
#define TP_INFO_H

#include <stddef.h>

#define TP_INFO_TABLE "tp.info/1"

typedef struct tp_info_table {
    size_t size;
    const char *(*version)(void); /* the build's TP_VERSION */
    unsigned (*bump)(void);       /* increments and returns a counter of that module */
} tp_info_table_t;

#endif /* TP_INFO_H */
