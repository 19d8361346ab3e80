/*
 * modules.c: return addresses to (module, offset), for the writer's STACKS
 * definitions. Runs under hl_wlock.
 *
 *   address -> _dl_find_object (lock-free: the writer never waits for the
 *   loader's lock, which a thread inside dlopen holds while it allocates and
 *   may wait for the writer) -> the object's link map, bias and mapping
 *   -> our table (by link map and mapping start; a dlclose'd and reloaded
 *   object is a new entry) -> its id in the current trace, defining it in
 *   MODULES on first use with its path and GNU build-id (read from the ELF
 *   program headers of the mapping)
 *
 * An address in no object (JIT code) is frame (0, address).
 */
#include "agent.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>

typedef struct mod {
    const void *map;
    uint64_t start, end, bias;
    uint32_t trace_id; /* 0: not defined in the current trace */
} mod_t;

static mod_t *mods;
static size_t mods_cap, mods_n;
static size_t last; /* the entry found last: frames come in runs */

/* The GNU build-id note, if the program headers are where the ELF header
 * says, inside the mapping. */
static size_t build_id(uint64_t start, uint64_t end, uint64_t bias, uint8_t *out, size_t max) {
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)(uintptr_t)start;
    if (end - start < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG)) return 0;
    uint64_t ph = start + eh->e_phoff;
    if (eh->e_phentsize != sizeof(ElfW(Phdr)) || ph < start ||
        ph + (uint64_t)eh->e_phnum * sizeof(ElfW(Phdr)) > end)
        return 0;
    for (int i = 0; i < eh->e_phnum; i++) {
        const ElfW(Phdr) *p = (const ElfW(Phdr) *)(uintptr_t)(ph + i * sizeof(ElfW(Phdr)));
        if (p->p_type != PT_NOTE) continue;
        const uint8_t *n = (const uint8_t *)(uintptr_t)(bias + p->p_vaddr), *e = n + p->p_memsz;
        if ((uint64_t)(uintptr_t)n < start || (uint64_t)(uintptr_t)e > end) continue;
        while (n + sizeof(ElfW(Nhdr)) <= e) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)n;
            size_t nsz = (nh->n_namesz + 3) & ~3u, dsz = (nh->n_descsz + 3) & ~3u;
            const uint8_t *name = n + sizeof *nh, *desc = name + nsz;
            if (desc + dsz > e) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                nh->n_descsz <= max) {
                memcpy(out, desc, nh->n_descsz);
                return nh->n_descsz;
            }
            n = desc + dsz;
        }
    }
    return 0;
}

static mod_t *lookup(uint64_t addr) {
    if (last < mods_n && addr >= mods[last].start && addr < mods[last].end) return &mods[last];
    struct dl_find_object o;
    if (_dl_find_object((void *)(uintptr_t)addr, &o) != 0) return NULL;
    uint64_t start = (uintptr_t)o.dlfo_map_start, end = (uintptr_t)o.dlfo_map_end;
    for (size_t i = 0; i < mods_n; i++)
        if (mods[i].map == o.dlfo_link_map && mods[i].start == start && mods[i].end == end) {
            last = i;
            return &mods[i];
        }
    if (mods_n == mods_cap) {
        size_t cap = mods_cap ? mods_cap * 2 : 64;
        mod_t *p = hl_os_grow(mods, mods_cap * sizeof *mods, cap * sizeof *mods);
        if (!p) return NULL;
        mods = p;
        mods_cap = cap;
    }
    mod_t *m = &mods[mods_n];
    m->map = o.dlfo_link_map;
    m->start = start;
    m->end = end;
    m->bias = o.dlfo_link_map ? o.dlfo_link_map->l_addr : 0;
    m->trace_id = 0;
    last = mods_n++;
    return m;
}

hl_frame_t hl_module_frame(hl_writer_t *w, uint64_t addr) {
    mod_t *m = lookup(addr);
    if (!m) return (hl_frame_t){0, addr};
    if (!m->trace_id) {
        const struct link_map *lm = m->map;
        const char *path = lm && lm->l_name && lm->l_name[0] ? lm->l_name : hl_agent_exe();
        uint8_t bid[64];
        size_t bl = build_id(m->start, m->end, m->bias, bid, sizeof bid);
        int64_t id = hl_writer_module(w, m->bias, m->end - m->start, path, strlen(path), bid, bl);
        if (id <= 0) return (hl_frame_t){0, addr};
        m->trace_id = (uint32_t)id;
    }
    return (hl_frame_t){m->trace_id, addr - m->bias};
}

void hl_modules_new_trace(void) {
    for (size_t i = 0; i < mods_n; i++)
        mods[i].trace_id = 0;
}
