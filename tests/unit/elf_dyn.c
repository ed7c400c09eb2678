/* Test helper: a small ELF64 reader for the dynamic symbol table and section. */
#include "elf_dyn.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = buf ? (size_t)n : 0;
    return buf;
}

int elf_dyn_read(const char *path, elf_dyn_t *out, char *why, size_t len)
{
    memset(out, 0, sizeof *out);
    size_t size;
    unsigned char *img = slurp(path, &size);
    if (!img) {
        snprintf(why, len, "cannot read %s", path);
        return -1;
    }
    int rc = -1;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64) {
        snprintf(why, len, "%s is not an ELF64 file", path);
        goto out;
    }
    if (eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > size) {
        snprintf(why, len, "%s: section table out of bounds", path);
        goto out;
    }
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM && sh[i].sh_type != SHT_DYNAMIC)
            continue;
        if (sh[i].sh_link >= eh->e_shnum || sh[i].sh_offset + sh[i].sh_size > size)
            continue;
        const char *str = (const char *)img + sh[sh[i].sh_link].sh_offset;
        if (sh[i].sh_type == SHT_DYNSYM) {
            const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
            size_t n = sh[i].sh_size / sizeof *sym;
            for (size_t k = 1; k < n; k++) {
                int bind = ELF64_ST_BIND(sym[k].st_info);
                if (sym[k].st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK))
                    continue;
                out->total_exports++;
                if (out->nexports < sizeof out->exports / sizeof out->exports[0])
                    out->exports[out->nexports++] = strdup(str + sym[k].st_name);
            }
        } else {
            const Elf64_Dyn *dyn = (const Elf64_Dyn *)(img + sh[i].sh_offset);
            size_t n = sh[i].sh_size / sizeof *dyn;
            for (size_t k = 0; k < n && dyn[k].d_tag != DT_NULL; k++) {
                if (dyn[k].d_tag == DT_SONAME)
                    out->has_soname = 1;
                if (dyn[k].d_tag == DT_NEEDED &&
                    out->nneeded < sizeof out->needed / sizeof out->needed[0])
                    out->needed[out->nneeded++] = strdup(str + dyn[k].d_un.d_val);
            }
        }
    }
    rc = 0;
out:
    free(img);
    return rc;
}

void elf_dyn_free(elf_dyn_t *d)
{
    for (size_t i = 0; i < d->nexports; i++)
        free(d->exports[i]);
    for (size_t i = 0; i < d->nneeded; i++)
        free(d->needed[i]);
    memset(d, 0, sizeof *d);
}
