/* Test helper: read what a shared object exports and needs, from its ELF file. */
#ifndef ELF_DYN_H
#define ELF_DYN_H

#include <stddef.h>

typedef struct elf_dyn {
    char *exports[64]; /* defined global/weak dynamic symbols */
    size_t nexports;
    size_t total_exports; /* all of them, also past the 64 kept */
    char *needed[32]; /* DT_NEEDED */
    size_t nneeded;
    int has_soname;
} elf_dyn_t;

/* 0 on success; on failure -1 with a reason in why. Free with elf_dyn_free. */
int elf_dyn_read(const char *path, elf_dyn_t *out, char *why, size_t len);
void elf_dyn_free(elf_dyn_t *d);

#endif
