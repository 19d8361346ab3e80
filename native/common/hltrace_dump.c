/*
 * hltrace-dump: prints a trace (version 1 or 2) in the dump text form of
 * testdata/vectors/README.md (the same text `heaplab convert TRACE OUT.txt`
 * writes), or with --counts a one-line summary per trace.
 *
 *   hltrace-dump TRACE            the dump, on stdout
 *   hltrace-dump --counts TRACE   events=N malloc=N ... end=exit:0 unrecorded=N ...
 *
 * On bad input everything before the problem is printed, then the error
 * ("FILE: byte X: PROBLEM (N events read before this point)") goes to stderr
 * and the exit status is 1. A trace cut short (no END block) is reported the
 * same way: its events are good, but the recording is incomplete.
 */
#include "hltrace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void quote(FILE *out, hl_bytes_t b) {
    fputc('"', out);
    for (size_t i = 0; i < b.len; i++) {
        uint8_t c = b.ptr[i];
        if (c == '"')
            fputs("\\\"", out);
        else if (c == '\\')
            fputs("\\\\", out);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c >= 0x20 && c <= 0x7e)
            fputc(c, out);
        else
            fprintf(out, "\\x%02x", c);
    }
    fputc('"', out);
}

static void opt_num(FILE *out, int has, uint64_t v) {
    if (has)
        fprintf(out, "%" PRIu64, v);
    else
        fputc('-', out);
}

static unsigned version;

static void dump_meta(FILE *out, const hl_meta_t *m) {
    version = m->version;
    fprintf(out, "hltrace %u\nmeta pid=%" PRIu64 " ppid=", m->version, m->pid);
    opt_num(out, m->has_ppid, m->ppid);
    fprintf(out,
            " start_ns=%" PRIu64 " pointer_size=%" PRIu64 " endian=%s time_unit_ns=%" PRIu64
            " stack_depth=%" PRIu64 "\nmeta argv=",
            m->start_ns, m->pointer_size, m->endian == 0 ? "little" : "big", m->time_unit_ns,
            m->stack_depth);
    for (size_t i = 0; i < m->argc; i++) {
        if (i) fputc(' ', out);
        quote(out, m->argv[i]);
    }
    fputs("\nmeta recorder=", out);
    quote(out, m->recorder);
    fputs(" executable=", out);
    quote(out, m->executable);
    fputs(" options=", out);
    quote(out, m->options);
    fputs(" clock=", out);
    quote(out, m->clock);
    fputs(" parent_pid=", out);
    opt_num(out, m->has_parent_pid, m->parent_pid);
    fputc('\n', out);
}

static void dump_item(FILE *out, const hl_item_t *it) {
    switch (it->kind) {
    case HL_ITEM_MODULE:
        fprintf(out, "module %u base=0x%" PRIx64 " size=0x%" PRIx64 " path=", it->u.module.id,
                it->u.module.base, it->u.module.size);
        quote(out, it->u.module.path);
        fputs(" build_id=", out);
        for (size_t i = 0; i < it->u.module.build_id.len; i++)
            fprintf(out, "%02x", it->u.module.build_id.ptr[i]);
        break;
    case HL_ITEM_STACK:
        fprintf(out, "stack %u frames=", it->u.stack.id);
        for (uint32_t i = 0; i < it->u.stack.nframes; i++)
            fprintf(out, "%s%u:0x%" PRIx64, i ? " " : "", it->u.stack.frames[i].module,
                    it->u.stack.frames[i].offset);
        break;
    case HL_ITEM_THREAD:
        fprintf(out, "thread %u tid=%" PRIu64 " name=", it->u.thread.index, it->u.thread.tid);
        quote(out, it->u.thread.name);
        if (it->u.thread.has_start)
            fprintf(out, " start=%u:%" PRIu64, it->u.thread.start_thread,
                    it->u.thread.start_steps);
        break;
    case HL_ITEM_EVENT: {
        const hl_event_t *e = &it->u.event;
        fprintf(out, "event %" PRIu64 " %s thread=%u time=%" PRIu64, e->index,
                hl_kind_name(e->kind), e->thread, e->time);
        if (hl_kind_is_release(e->kind) || (e->kind == HL_REALLOC && e->has_old))
            fprintf(out, " old=%" PRIu64, e->old);
        else if (e->kind == HL_REALLOC)
            fputs(" old=null", out);
        if (e->failed)
            fputs(" failed", out);
        else if (e->has_id)
            fprintf(out, " id=%" PRIu64, e->id);
        fprintf(out, " size=%" PRIu64, e->size);
        if (hl_kind_has_align(e->kind)) fprintf(out, " align=%" PRIu64, e->align);
        fprintf(out, " stack=%u", e->stack);
        if (e->inherited) fputs(" inherited", out);
        for (unsigned i = 0; i < e->n_after; i++)
            fprintf(out, "%s%u:%" PRIu64, i ? "," : " after=", e->after[i].thread,
                    e->after[i].steps);
        break;
    }
    case HL_ITEM_END: {
        const hl_end_t *e = &it->u.end;
        const char *rn = hl_end_reason_name(e->reason);
        fputs("end reason=", out);
        if (rn)
            fputs(rn, out);
        else
            fprintf(out, "%" PRIu64, e->reason);
        fprintf(out,
                " status=%" PRIu64 " end_ns=%" PRIu64 " events=%" PRIu64 " objects=%" PRIu64
                " unrecorded=%" PRIu64 " unknown_frees=%" PRIu64,
                e->status, e->end_ns, e->events, e->objects, e->unrecorded, e->unknown_frees);
        if (version >= 2)
            fprintf(out, " lost=%" PRIu64 " waited_ns=%" PRIu64 " inflight=%" PRIu64, e->lost,
                    e->waited_ns, e->inflight);
        break;
    }
    case HL_ITEM_SKIPPED:
        fprintf(out, "skipped kind=0x%02x bytes=%u", it->u.skipped.kind, it->u.skipped.bytes);
        break;
    }
    fputc('\n', out);
}

static int usage(FILE *f, int code) {
    fputs(
        "usage: hltrace-dump [--counts] TRACE\n"
        "  Prints a heaplab trace as text (the dump form of testdata/vectors/README.md).\n"
        "  --counts   one summary line instead: events per kind, threads, stacks, the END fields\n"
        "  TRACE may be - for standard input. Exit status 1 on a bad or cut-short trace.\n",
        f);
    return code;
}

int main(int argc, char **argv) {
    int counts = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--counts"))
            counts = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return usage(stdout, 0);
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "hltrace-dump: unknown option %s (expected --counts or --help)\n",
                    argv[i]);
            return usage(stderr, 2);
        } else if (!path)
            path = argv[i];
        else
            return usage(stderr, 2);
    }
    if (!path) return usage(stderr, 2);
    int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
    if (fd < 0) {
        fprintf(stderr, "hltrace-dump: %s: %s\n", path, strerror(errno));
        return 1;
    }
    hl_error_t err;
    hl_reader_t *r = hl_reader_new(&hl_mem_mmap, hl_fd_read, (void *)(intptr_t)fd, path, &err);
    char msg[1024];
    if (!r) {
        hl_error_format(&err, msg, sizeof msg);
        fprintf(stderr, "%s\n", msg);
        return 1;
    }
    FILE *out = stdout;
    if (!counts) dump_meta(out, hl_reader_meta(r));
    uint64_t kinds[HL_KIND_COUNT] = {0}, events = 0, failed = 0, inherited = 0, threads = 0,
             stacks = 0;
    uint64_t modules = 0, ends = 0;
    hl_end_t last_end = {0};
    hl_item_t it;
    int rc;
    while ((rc = hl_reader_next(r, &it)) == 1) {
        if (!counts) {
            dump_item(out, &it);
            continue;
        }
        switch (it.kind) {
        case HL_ITEM_EVENT:
            events++;
            kinds[it.u.event.kind]++;
            failed += it.u.event.failed;
            inherited += it.u.event.inherited;
            break;
        case HL_ITEM_THREAD:
            threads++;
            break;
        case HL_ITEM_STACK:
            stacks++;
            break;
        case HL_ITEM_MODULE:
            modules++;
            break;
        case HL_ITEM_END:
            ends++;
            last_end = it.u.end;
            break;
        default:
            break;
        }
    }
    if (counts) {
        const hl_meta_t *m = hl_reader_meta(r);
        printf("pid=%" PRIu64 " parent_pid=", m->pid);
        opt_num(stdout, m->has_parent_pid, m->parent_pid);
        printf(" events=%" PRIu64, events);
        for (int k = 0; k < HL_KIND_COUNT; k++)
            printf(" %s=%" PRIu64, hl_kind_name(k), kinds[k]);
        printf(" failed=%" PRIu64 " inherited=%" PRIu64 " threads=%" PRIu64 " stacks=%" PRIu64
               " modules=%" PRIu64 " live_at_end=%" PRIu64,
               failed, inherited, threads, stacks, modules, hl_reader_live_objects(r));
        if (ends) {
            const char *rn = hl_end_reason_name(last_end.reason);
            printf(" end=%s:%" PRIu64 " ends=%" PRIu64 " unrecorded=%" PRIu64
                   " unknown_frees=%" PRIu64 " lost=%" PRIu64 " waited_ns=%" PRIu64,
                   rn ? rn : "?", last_end.status, ends, last_end.unrecorded,
                   last_end.unknown_frees, last_end.lost, last_end.waited_ns);
        } else {
            printf(" end=none");
        }
        putchar('\n');
    }
    fflush(stdout);
    int status = 0;
    if (rc < 0) {
        hl_error_format(hl_reader_error(r), msg, sizeof msg);
        fprintf(stderr, "%s\n", msg);
        status = 1;
    }
    hl_reader_free(r);
    if (fd > 0) close(fd);
    return status;
}
