/* Helpers shared by the loader test files: temporary directories, file
 * copies, report lookup. Test code: failures of the helpers themselves abort
 * the test through CUnit assertions in the callers. */
#ifndef TEST_LOADER_UTIL_H
#define TEST_LOADER_UTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "hk_loader.h"

/* Path of a built test plugin or generated candidate in HK_TEST_PLUGIN_DIR
 * ("tp_good.so"). Returns a static buffer of the calling thread. */
const char *tl_plugin(const char *file);

/* Creates a fresh directory under HK_TEST_TMP_DIR (in the build tree; mode
 * 0755) into buf. 0 on success. */
int tl_mkdtemp(char *buf, size_t n);

/* Removes a directory made by tl_mkdtemp and the plain files in it. */
void tl_rmtree(const char *dir);

/* Copies src to dir/name with mode; writes the new path into out. 0 on success. */
int tl_copy(const char *src, const char *dir, const char *name, mode_t mode,
            char *out, size_t n);

/* The report whose path equals path, or NULL. */
const hk_load_report_t *tl_report(const hk_loader_t *loader, const char *path);

/* A loader that ignores HK_PLUGIN_PATH and searches dir (may be NULL). */
hk_loader_t *tl_loader(const char *dir);

/* Opens one file with a fresh loader and returns its report (the loader is
 * kept in *loader for the caller to destroy). */
const hk_load_report_t *tl_open_one(const char *file, hk_loader_t **loader);

/* 1 when path is mapped into this process (/proc/self/maps), else 0. */
int tl_is_mapped(const char *path);

/* Registration of the test files. */
void tl_register_abi(void);
void tl_register_scan(void);

#endif /* TEST_LOADER_UTIL_H */
