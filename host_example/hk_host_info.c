/* hk-host info: a plugin's ABI, flags, tables with their sizes, and how a
 * handle binds. Everything but the handle comes from the loaded file alone,
 * so it is shown even where no handle can be made (no GPU, no driver); the
 * handle's failure is one line, and the exit status 1. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "hk_blas1.h"
#include "hk_host.h"
#include "hk_memory.h"
#include "hk_status_text.h"

/* A plugin that never ends its table list is cut here. */
#define HKH_MAX_TABLES 256

typedef struct hkh_table_row {
    const char *name;  /* the plugin's string */
    hk_status_t st;    /* of hk_plugin_get_table */
    size_t size;       /* bytes taken (the copy's size field) */
    int slots, present; /* known tables: slots the host knows, non-NULL ones; else -1 */
} hkh_table_row_t;

/* The host's copy of one table: its size, and for a table this host knows
 * how many of its slots the plugin fills. */
static void hkh_measure(const hk_plugin_t *p, const char *name, hkh_table_row_t *row)
{
    static union {
        size_t size;
        unsigned char bytes[HK_TABLE_SIZE_MAX];
    } buf;
    /* Both known tables are a size field and then function pointers only. */
    size_t known = 0, first = 0;
    if (!strcmp(name, HK_TABLE_BLAS1_V1))
        known = sizeof(hk_blas1_v1_t), first = offsetof(hk_blas1_v1_t, saxpy);
    else if (!strcmp(name, HK_TABLE_MEMORY_V1))
        known = sizeof(hk_memory_v1_t), first = offsetof(hk_memory_v1_t, alloc);
    row->name = name;
    row->slots = row->present = -1;
    row->st = hk_plugin_get_table(p, name, &buf, known ? known : sizeof buf);
    row->size = row->st == HK_STATUS_OK ? buf.size : 0;
    if (row->st != HK_STATUS_OK || !known)
        return;
    void (*slot)(void);
    row->slots = (int)((known - first) / sizeof slot);
    row->present = 0;
    for (int i = 0; i < row->slots; i++) {
        memcpy(&slot, buf.bytes + first + (size_t)i * sizeof slot, sizeof slot);
        row->present += slot != NULL;
    }
}

static size_t hkh_tables_of(const hkh_target_t *t, hkh_table_row_t *rows)
{
    size_t n = 0;
    const char *name;
    if (t->vt->enum_tables) {
        while (n < HKH_MAX_TABLES && t->vt->enum_tables(n, &name) == HK_STATUS_OK && name)
            hkh_measure(t->plugin, name, &rows[n]), n++;
        return n;
    }
    /* No enum_tables: ask for the tables this host knows by name. */
    static const char *const known[] = {HK_TABLE_BLAS1_V1, HK_TABLE_MEMORY_V1};
    for (size_t i = 0; i < 2; i++) {
        hkh_measure(t->plugin, known[i], &rows[n]);
        n += rows[n].st != HK_STATUS_NOT_FOUND;
    }
    return n;
}

static void hkh_info_text(const hkh_target_t *t, const hkh_table_row_t *rows, size_t n)
{
    uint32_t abi = hk_plugin_abi(t->plugin), fl = hk_plugin_flags(t->plugin);
    uint32_t mem = fl & HK_PLUGIN_MEMORY_MASK;
    printf("path: %s\nABI: %u.%u\n", hkh_esc(hk_plugin_path(t->plugin)),
           HK_ABI_VERSION_MAJOR(abi), HK_ABI_VERSION_MINOR(abi));
    printf("flags: 0x%x (%smemory: %s)\n", fl, (fl & HK_PLUGIN_UNLOAD_SAFE) ? "unload-safe, " : "",
           mem == HK_PLUGIN_MEMORY_HOST   ? "host"
           : mem == HK_PLUGIN_MEMORY_CUDA ? "CUDA device"
                                          : "not stated, ABI before 1.2");
    printf("tables:%s\n", t->vt->enum_tables ? "" : " (no enum_tables: the known names asked for)");
    for (size_t i = 0; i < n; i++) {
        const hkh_table_row_t *r = &rows[i];
        if (r->st != HK_STATUS_OK)
            printf("  %-12s not obtainable: %s\n", hkh_esc(r->name), hk_status_name(r->st));
        else if (r->slots >= 0)
            printf("  %-12s %4zu bytes, %d of %d slots\n", hkh_esc(r->name), r->size,
                   r->present, r->slots);
        else
            printf("  %-12s %4zu bytes\n", hkh_esc(r->name), r->size);
    }
}

static void hkh_info_json(hk__json_t *j, const hkh_table_row_t *rows, size_t n)
{
    hk__json_open(j, "tables", '[');
    for (size_t i = 0; i < n; i++) {
        hk__json_open(j, NULL, '{');
        hk__json_str(j, "name", rows[i].name);
        hk__json_str(j, "status", hk_status_name(rows[i].st));
        hk__json_int(j, "size", (long long)rows[i].size);
        if (rows[i].slots >= 0) {
            hk__json_int(j, "slots", rows[i].slots);
            hk__json_int(j, "present", rows[i].present);
        } else {
            hk__json_null(j, "slots");
            hk__json_null(j, "present");
        }
        hk__json_close(j);
    }
    hk__json_close(j);
}

/* The handle line; returns 0, or 1 when no handle could be made. */
static int hkh_info_handle(const hkh_target_t *t)
{
    hk__json_t *j = hkh_json();
    hk_handle_info_t hi = {.size = sizeof hi};
    hk_status_t st = HK_STATUS_NOT_SUPPORTED;
    if (t->handle && t->vt->handle_info)
        st = t->vt->handle_info(t->handle, &hi);
    if (j) {
        hk__json_open(j, "handle", '{');
        hk__json_bool(j, "created", t->handle != NULL);
        hk__json_str(j, "error", t->handle ? NULL : t->handle_error);
        if (st == HK_STATUS_OK) {
            hk__json_int(j, "device", hi.device);
            hk__json_int(j, "context_id", (long long)hi.context_id);
            hk__json_bool(j, "owns_primary", hi.owns_primary);
        }
        hk__json_close(j);
    } else if (!t->handle) {
        printf("handle: cannot be created: %s\n", hkh_esc(t->handle_error));
    } else if (st == HK_STATUS_OK) {
        printf("handle: device %d, context id %llu, owns primary: %s\n", hi.device,
               (unsigned long long)hi.context_id, hi.owns_primary ? "yes" : "no");
    } else {
        printf("handle: created; its binding is unknown (%s)\n",
               t->vt->handle_info ? hk_status_name(st) : "the plugin has no handle_info");
    }
    return t->handle ? HKH_EXIT_OK : HKH_EXIT_FAIL;
}

int hkh_cmd_info(const hkh_opts_t *opts)
{
    hkh_doc_begin(opts, "info");
    hk_loader_t *loader = hkh_loader(opts->verbose, 1);
    if (!loader)
        return hkh_doc_end(HKH_EXIT_FAIL);
    hkh_target_t t;
    int rc = hkh_choose(loader, opts, &t);
    if (rc == 0) {
        static hkh_table_row_t rows[HKH_MAX_TABLES];
        size_t n = hkh_tables_of(&t, rows);
        hkh_print_choice(&t);
        hk__json_t *j = hkh_json();
        if (j)
            hkh_info_json(j, rows, n);
        else
            hkh_info_text(&t, rows, n);
        rc = hkh_info_handle(&t);
        hkh_release(&t);
    }
    hk_loader_destroy(loader);
    return hkh_doc_end(rc);
}
