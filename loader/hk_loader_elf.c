/* handlekit loader: what an ELF file must be before anything maps it.
 *
 * The dynamic loader maps a file's segments as they are described, and a
 * segment that lies past the end of a truncated file (an interrupted
 * install) turns the first touch of its pages into SIGBUS in whatever
 * process mapped it. So the header, the program and section header tables
 * and every segment's file range are checked against the file size first,
 * with pread on the checked descriptor.
 *
 * Initialization functions: the plugin ABI says that loading a plugin runs
 * no code. Every gcc or clang build of a shared object carries the
 * toolchain's own: DT_INIT at the start of the .init section (crti.o's
 * _init) and one DT_INIT_ARRAY entry (crtbegin's frame_dummy). A constructor
 * of the plugin adds a DT_INIT_ARRAY entry, "-Wl,-init" moves DT_INIT out of
 * .init, and DT_PREINIT_ARRAY has no place in a shared object: each is
 * refused here. The rule cannot see a constructor that replaces the
 * toolchain's entry (a plugin linked with -nostartfiles): the isolated probe
 * is the guard against what such code does. Sanitizer runtimes add one
 * constructor per instrumented source file, so the rule is off in loaders
 * built with AddressSanitizer or ThreadSanitizer (their plugins are built the
 * same way). */
#include "hk__loader.h"

#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#define HK__MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HK__MACHINE EM_AARCH64
#elif defined(__powerpc64__)
#define HK__MACHINE EM_PPC64
#elif defined(__riscv)
#define HK__MACHINE EM_RISCV
#elif defined(__i386__)
#define HK__MACHINE EM_386
#elif defined(__arm__)
#define HK__MACHINE EM_ARM
#else
#error "hk_loader_elf.c: add this machine's EM_ value"
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HK__DATA ELFDATA2LSB
#else
#define HK__DATA ELFDATA2MSB
#endif

#define HK__CLASS (__ELF_NATIVE_CLASS == 64 ? ELFCLASS64 : ELFCLASS32)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HK__INIT_RULE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HK__INIT_RULE 0
#endif
#endif
#ifndef HK__INIT_RULE
#define HK__INIT_RULE 1
#endif

/* Bounds on tables we read whole; real plugins have far fewer. */
#define HK__MAX_PHDRS 1024u
#define HK__MAX_SHDRS 65536u
#define HK__MAX_DYNAMIC (1u << 20)
#define HK__MAX_SHSTRTAB (1u << 20)

typedef struct hk__elf {
    int fd;
    unsigned long long size;
    ElfW(Ehdr) eh;
    ElfW(Phdr) *ph;
    ElfW(Shdr) *sh; /* NULL when the file has no section headers */
    unsigned long long shnum;
    char *reason;
    size_t n;
} hk__elf_t;

static const char *hk__machine_name(unsigned m)
{
    switch (m) {
    case EM_386: return "x86";
    case EM_X86_64: return "x86-64";
    case EM_ARM: return "arm";
    case EM_AARCH64: return "aarch64";
    case EM_PPC64: return "ppc64";
    case EM_RISCV: return "riscv";
    case EM_S390: return "s390";
    }
    return "other";
}

static const char *hk__type_name(unsigned t)
{
    switch (t) {
    case ET_NONE: return "NONE";
    case ET_REL: return "REL (an object file)";
    case ET_EXEC: return "EXEC (an executable)";
    case ET_CORE: return "CORE (a core dump)";
    }
    return "unknown";
}

/* Reads exactly len bytes at off; 0 on success. The caller checked bounds. */
static int hk__read_at(const hk__elf_t *e, void *buf, size_t len, unsigned long long off)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t got = pread(e->fd, p, len, (off_t)off);
        if (got <= 0) {
            snprintf(e->reason, e->n, "cannot read the file at offset %llu", off);
            return -1;
        }
        p += got;
        len -= (size_t)got;
        off += (unsigned long long)got;
    }
    return 0;
}

static int hk__truncated(const hk__elf_t *e, const char *what, unsigned long long end)
{
    snprintf(e->reason, e->n, "truncated ELF: %s end at %llu, file is %llu bytes", what, end,
             e->size);
    return -1;
}

static int hk__check_ident(hk__elf_t *e)
{
    unsigned char id[EI_NIDENT];
    if (e->size < SELFMAG) {
        snprintf(e->reason, e->n, "not an ELF file (%llu bytes)", e->size);
        return -1;
    }
    size_t len = e->size < EI_NIDENT ? (size_t)e->size : EI_NIDENT;
    if (hk__read_at(e, id, len, 0) != 0)
        return -1;
    if (memcmp(id, ELFMAG, SELFMAG) != 0) {
        snprintf(e->reason, e->n, "not an ELF file");
        return -1;
    }
    if (e->size < sizeof(e->eh)) {
        snprintf(e->reason, e->n, "truncated ELF: the header needs %zu bytes, file is %llu bytes",
                 sizeof(e->eh), e->size);
        return -1;
    }
    if (id[EI_CLASS] != HK__CLASS) {
        if (id[EI_CLASS] == ELFCLASS32 || id[EI_CLASS] == ELFCLASS64)
            snprintf(e->reason, e->n, "ELF class %d, host is %d",
                     id[EI_CLASS] == ELFCLASS32 ? 32 : 64, HK__CLASS == ELFCLASS32 ? 32 : 64);
        else
            snprintf(e->reason, e->n, "ELF class byte %u is invalid", (unsigned)id[EI_CLASS]);
        return -1;
    }
    if (id[EI_DATA] != HK__DATA) {
        snprintf(e->reason, e->n, "ELF byte order is %s, host is %s",
                 id[EI_DATA] == ELFDATA2MSB ? "big-endian"
                 : id[EI_DATA] == ELFDATA2LSB ? "little-endian" : "invalid",
                 HK__DATA == ELFDATA2LSB ? "little-endian" : "big-endian");
        return -1;
    }
    if (id[EI_VERSION] != EV_CURRENT) {
        snprintf(e->reason, e->n, "ELF version %u, expected %u", (unsigned)id[EI_VERSION],
                 (unsigned)EV_CURRENT);
        return -1;
    }
    return 0;
}

static int hk__check_header(hk__elf_t *e)
{
    const ElfW(Ehdr) *h = &e->eh;
    if (hk__check_ident(e) != 0 || hk__read_at(e, &e->eh, sizeof(e->eh), 0) != 0)
        return -1;
    if (h->e_type != ET_DYN) {
        snprintf(e->reason, e->n, "ELF type %s, expected a shared object (DYN)",
                 hk__type_name(h->e_type));
        return -1;
    }
    if (h->e_machine != HK__MACHINE) {
        snprintf(e->reason, e->n, "ELF machine %u (%s), host is %u (%s)", (unsigned)h->e_machine,
                 hk__machine_name(h->e_machine), (unsigned)HK__MACHINE,
                 hk__machine_name(HK__MACHINE));
        return -1;
    }
    if (h->e_version != EV_CURRENT || h->e_ehsize != sizeof(ElfW(Ehdr))) {
        snprintf(e->reason, e->n, "ELF header is malformed (version %u, header size %u)",
                 (unsigned)h->e_version, (unsigned)h->e_ehsize);
        return -1;
    }
    return 0;
}

static int hk__read_phdrs(hk__elf_t *e)
{
    const ElfW(Ehdr) *h = &e->eh;
    if (h->e_phentsize != sizeof(ElfW(Phdr))) {
        snprintf(e->reason, e->n, "program header entry size %u, expected %zu",
                 (unsigned)h->e_phentsize, sizeof(ElfW(Phdr)));
        return -1;
    }
    if (h->e_phnum == 0 || h->e_phnum > HK__MAX_PHDRS) {
        snprintf(e->reason, e->n, "%u program headers (expected 1 to %u)", (unsigned)h->e_phnum,
                 HK__MAX_PHDRS);
        return -1;
    }
    unsigned long long end = (unsigned long long)h->e_phoff
                             + (unsigned long long)h->e_phnum * sizeof(ElfW(Phdr));
    if (h->e_phoff > e->size || end > e->size)
        return hk__truncated(e, "program headers", end < h->e_phoff ? ~0ull : end);
    e->ph = malloc((size_t)h->e_phnum * sizeof(ElfW(Phdr)));
    if (!e->ph) {
        snprintf(e->reason, e->n, "out of memory");
        return -1;
    }
    return hk__read_at(e, e->ph, (size_t)h->e_phnum * sizeof(ElfW(Phdr)), h->e_phoff);
}

static int hk__read_shdrs(hk__elf_t *e)
{
    const ElfW(Ehdr) *h = &e->eh;
    if (h->e_shoff == 0)
        return 0; /* no section headers: nothing to bound, nothing to read */
    if (h->e_shentsize != sizeof(ElfW(Shdr))) {
        snprintf(e->reason, e->n, "section header entry size %u, expected %zu",
                 (unsigned)h->e_shentsize, sizeof(ElfW(Shdr)));
        return -1;
    }
    unsigned long long first = (unsigned long long)h->e_shoff + sizeof(ElfW(Shdr));
    if (h->e_shoff > e->size || first > e->size)
        return hk__truncated(e, "section headers", first < h->e_shoff ? ~0ull : first);
    unsigned long long count = h->e_shnum;
    if (count == 0) { /* more than SHN_LORESERVE sections: the count is in entry 0 */
        ElfW(Shdr) s0;
        if (hk__read_at(e, &s0, sizeof(s0), h->e_shoff) != 0)
            return -1;
        count = s0.sh_size;
    }
    if (count == 0 || count > HK__MAX_SHDRS) {
        snprintf(e->reason, e->n, "%llu section headers (expected 1 to %u)", count,
                 HK__MAX_SHDRS);
        return -1;
    }
    unsigned long long end = (unsigned long long)h->e_shoff + count * sizeof(ElfW(Shdr));
    if (end > e->size)
        return hk__truncated(e, "section headers", end);
    e->sh = malloc((size_t)count * sizeof(ElfW(Shdr)));
    if (!e->sh) {
        snprintf(e->reason, e->n, "out of memory");
        return -1;
    }
    e->shnum = count;
    return hk__read_at(e, e->sh, (size_t)count * sizeof(ElfW(Shdr)), h->e_shoff);
}

static const char *hk__seg_name(unsigned t)
{
    switch (t) {
    case PT_LOAD: return "LOAD";
    case PT_DYNAMIC: return "DYNAMIC";
    case PT_INTERP: return "INTERP";
    case PT_NOTE: return "NOTE";
    case PT_TLS: return "TLS";
    case PT_GNU_EH_FRAME: return "GNU_EH_FRAME";
    case PT_GNU_RELRO: return "GNU_RELRO";
    }
    return "other";
}

/* Every segment's file range inside the file; one LOAD and one DYNAMIC. */
static int hk__check_segments(hk__elf_t *e, const ElfW(Phdr) **dyn)
{
    unsigned loads = 0;
    *dyn = NULL;
    for (unsigned i = 0; i < e->eh.e_phnum; i++) {
        const ElfW(Phdr) *p = &e->ph[i];
        unsigned long long end = (unsigned long long)p->p_offset + p->p_filesz;
        if (p->p_filesz > 0 && (p->p_offset > e->size || end > e->size || end < p->p_offset)) {
            snprintf(e->reason, e->n, "truncated ELF: segment %u (%s) ends at %llu, file is "
                     "%llu bytes", i, hk__seg_name(p->p_type),
                     end < p->p_offset ? ~0ull : end, e->size);
            return -1;
        }
        if (p->p_type == PT_LOAD) {
            loads++;
            if (p->p_filesz > p->p_memsz) {
                snprintf(e->reason, e->n, "segment %u (LOAD): file size %llu exceeds its "
                         "memory size %llu", i, (unsigned long long)p->p_filesz,
                         (unsigned long long)p->p_memsz);
                return -1;
            }
        } else if (p->p_type == PT_DYNAMIC && !*dyn) {
            *dyn = p;
        }
    }
    if (loads == 0) {
        snprintf(e->reason, e->n, "no loadable segment");
        return -1;
    }
    if (!*dyn || (*dyn)->p_filesz < sizeof(ElfW(Dyn))) {
        snprintf(e->reason, e->n, "no dynamic section: not a shared object");
        return -1;
    }
    return 0;
}

/* The address of the ".init" section, or 0 when there is none (or no
 * section headers to tell). */
static unsigned long long hk__init_section(hk__elf_t *e, int *known)
{
    *known = 0;
    if (!e->sh)
        return 0;
    unsigned long long idx = e->eh.e_shstrndx;
    if (idx == SHN_XINDEX)
        idx = e->sh[0].sh_link;
    if (idx == SHN_UNDEF || idx >= e->shnum)
        return 0;
    const ElfW(Shdr) *strs = &e->sh[idx];
    unsigned long long end = (unsigned long long)strs->sh_offset + strs->sh_size;
    if (strs->sh_size == 0 || strs->sh_size > HK__MAX_SHSTRTAB || end > e->size
        || end < strs->sh_offset)
        return 0;
    char *names = malloc((size_t)strs->sh_size + 1);
    if (!names || hk__read_at(e, names, (size_t)strs->sh_size, strs->sh_offset) != 0) {
        free(names);
        return 0;
    }
    names[strs->sh_size] = '\0';
    unsigned long long addr = 0;
    *known = 1;
    for (unsigned long long i = 0; i < e->shnum; i++) {
        if (e->sh[i].sh_name < strs->sh_size && strcmp(names + e->sh[i].sh_name, ".init") == 0) {
            addr = e->sh[i].sh_addr;
            break;
        }
    }
    free(names);
    return addr;
}

static int hk__check_dynamic(hk__elf_t *e, const ElfW(Phdr) *dyn)
{
    size_t len = dyn->p_filesz > HK__MAX_DYNAMIC ? HK__MAX_DYNAMIC : (size_t)dyn->p_filesz;
    size_t count = len / sizeof(ElfW(Dyn));
    ElfW(Dyn) *d = malloc(count * sizeof(ElfW(Dyn)));
    unsigned long long init = 0, init_array = 0, flags1 = 0;
    int has_init = 0, preinit = 0, rc = -1;

    if (!d) {
        snprintf(e->reason, e->n, "out of memory");
        return -1;
    }
    if (hk__read_at(e, d, count * sizeof(ElfW(Dyn)), dyn->p_offset) != 0)
        goto out;
    for (size_t i = 0; i < count && d[i].d_tag != DT_NULL; i++) {
        switch (d[i].d_tag) {
        case DT_INIT: init = d[i].d_un.d_ptr; has_init = 1; break;
        case DT_INIT_ARRAYSZ: init_array = d[i].d_un.d_val; break;
        case DT_PREINIT_ARRAY:
        case DT_PREINIT_ARRAYSZ: preinit = 1; break;
        case DT_FLAGS_1: flags1 = d[i].d_un.d_val; break;
        }
    }
    if (flags1 & DF_1_PIE) {
        snprintf(e->reason, e->n, "a position-independent executable, not a shared object");
        goto out;
    }
    if (HK__INIT_RULE) {
        unsigned long long fns = init_array / sizeof(ElfW(Addr));
        int known = 0;
        unsigned long long init_sec = hk__init_section(e, &known);
        if (preinit) {
            snprintf(e->reason, e->n, "has a DT_PREINIT_ARRAY: loading a plugin must run no code");
            goto out;
        }
        if (fns > 1) {
            snprintf(e->reason, e->n, "has %llu initialization functions (DT_INIT_ARRAY), "
                     "the toolchain's one and %llu constructor%s: loading a plugin must run "
                     "no code", fns, fns - 1, fns == 2 ? "" : "s");
            goto out;
        }
        if (has_init && known && init != init_sec) {
            snprintf(e->reason, e->n, "DT_INIT is 0x%llx, not the .init section%s: loading a "
                     "plugin must run no code", init, init_sec ? "" : " (there is none)");
            goto out;
        }
    }
    rc = 0;
out:
    free(d);
    return rc;
}

hk_status_t hk__elf_check(int fd, off_t size, char *reason, size_t n)
{
    hk__elf_t e;
    const ElfW(Phdr) *dyn = NULL;
    hk_status_t st = HK_STATUS_LOAD_FAILED;

    memset(&e, 0, sizeof(e));
    e.fd = fd;
    e.size = size < 0 ? 0 : (unsigned long long)size;
    e.reason = reason;
    e.n = n;
    /* Segments before section headers: they are what a mapping touches, so
     * a file cut in the middle is reported by the segment that it cuts. */
    if (hk__check_header(&e) != 0 || hk__read_phdrs(&e) != 0
        || hk__check_segments(&e, &dyn) != 0 || hk__read_shdrs(&e) != 0
        || hk__check_dynamic(&e, dyn) != 0)
        goto out;
    st = HK_STATUS_OK;
out:
    free(e.ph);
    free(e.sh);
    return st;
}
