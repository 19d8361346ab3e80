/*
 * hltrace-script SCRIPT OUT: builds a trace with the C writer from a script,
 * so the tests can check that the C writer reproduces the committed vectors
 * byte for byte. A test tool: it uses malloc freely, unlike the library.
 *
 *   version 1 scripts: a dump plus the writer directives `writer`, `flush`
 *     and `raw_block` (testdata/vectors/README.md, crates/heaplab-trace/src/dump.rs)
 *   version 2 scripts (`writer version=2`): definitions as in a dump, then
 *     `clock`, `block thread=T round=R` followed by its `row` lines, an
 *     `inherited time_ns=N` block followed by its `obj` lines, `end`, and
 *     `raw_block`; rows are encoded with hltrace_enc.h, as the agent does
 */
#include "hltrace.h"
#include "hltrace_enc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct tok {
    char key[64];
    uint8_t val[4096];
    size_t vlen;
} tok_t;

static int lineno;

static void die(const char *why) {
    fprintf(stderr, "hltrace-script: line %d: %s\n", lineno, why);
    exit(1);
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Splits at spaces outside quotes: `word`, `key=value` or `key="quoted"`. */
static int tokenize(const char *s, tok_t *t, int max) {
    int n = 0;
    size_t i = 0, len = strlen(s);
    while (i < len) {
        if (s[i] == ' ') {
            i++;
            continue;
        }
        if (n == max) die("too many tokens");
        tok_t *k = &t[n++];
        size_t st = i;
        while (i < len && s[i] != ' ' && s[i] != '=' && s[i] != '"')
            i++;
        if (i - st >= sizeof k->key) die("token too long");
        memcpy(k->key, s + st, i - st);
        k->key[i - st] = 0;
        k->vlen = 0;
        if (i < len && s[i] == '=') i++;
        if (i < len && s[i] == '"') {
            i++;
            for (;;) {
                if (i >= len) die("unterminated string");
                char c = s[i++];
                if (c == '"') break;
                if (k->vlen + 1 >= sizeof k->val) die("string too long");
                if (c == '\\') {
                    if (i >= len) die("dangling backslash");
                    char e = s[i++];
                    if (e == 'n')
                        k->val[k->vlen++] = '\n';
                    else if (e == 't')
                        k->val[k->vlen++] = '\t';
                    else if (e == 'x') {
                        if (i + 2 > len || hexval(s[i]) < 0 || hexval(s[i + 1]) < 0)
                            die("bad \\x escape");
                        k->val[k->vlen++] = (uint8_t)(hexval(s[i]) << 4 | hexval(s[i + 1]));
                        i += 2;
                    } else
                        k->val[k->vlen++] = (uint8_t)e;
                } else
                    k->val[k->vlen++] = (uint8_t)c;
            }
        } else {
            while (i < len && s[i] != ' ') {
                if (k->vlen + 1 >= sizeof k->val) die("value too long");
                k->val[k->vlen++] = (uint8_t)s[i++];
            }
        }
        k->val[k->vlen] = 0;
    }
    return n;
}

static tok_t *field(tok_t *t, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].key, key)) return &t[i];
    return NULL;
}

static uint64_t parse_num(const char *s) {
    char *end;
    errno = 0;
    uint64_t v = strncmp(s, "0x", 2) ? strtoull(s, &end, 10) : strtoull(s + 2, &end, 16);
    if (errno || !*s || *end) die("not a number");
    return v;
}

static uint64_t num(tok_t *t, int n, const char *key) {
    tok_t *f = field(t, n, key);
    if (!f) die("missing field");
    return parse_num((const char *)f->val);
}

static hl_bytes_t opt_str(tok_t *t, int n, const char *key) {
    tok_t *f = field(t, n, key);
    hl_bytes_t b = {NULL, 0};
    if (f && f->vlen) {
        uint8_t *p = malloc(f->vlen);
        memcpy(p, f->val, f->vlen);
        b.ptr = p;
        b.len = f->vlen;
    }
    return b;
}

static size_t unhex(const tok_t *f, uint8_t *out) {
    if (f->vlen % 2) die("odd number of hex digits");
    for (size_t i = 0; i < f->vlen; i += 2) {
        int a = hexval(f->val[i]), b = hexval(f->val[i + 1]);
        if (a < 0 || b < 0) die("bad hex");
        out[i / 2] = (uint8_t)(a << 4 | b);
    }
    return f->vlen / 2;
}

/* ---- version 2: rows and blocks */
static int v2;
static hl_clock_t clk = {0, 0, 1ull << 32};
static hl_enc_t encs[256];
static uint64_t tbytes[256];
static int64_t blk_thread = -1;
static uint64_t blk_round;
static uint8_t blk_data[1 << 24];
static size_t blk_len;
static uint64_t total_rows;
static uint8_t inh[1 << 20];
static size_t inh_len, inh_n;
static int inh_open;
static uint64_t inh_time;

static int kind_of(const char *name) {
    for (int k = 0; k < HL_KIND_COUNT; k++)
        if (!strcmp(name, hl_kind_name(k))) return k;
    die("unknown kind");
    return -1;
}

/* "T:N" */
static void pair(const tok_t *f, uint32_t *a, uint64_t *b) {
    const char *s = (const char *)f->val, *colon = strchr(s, ':');
    if (!colon) die("expected T:N");
    char x[32];
    if ((size_t)(colon - s) >= sizeof x) die("bad T:N");
    memcpy(x, s, (size_t)(colon - s));
    x[colon - s] = 0;
    *a = (uint32_t)parse_num(x);
    *b = parse_num(colon + 1);
}

static void flush_v2(hl_writer_t *w) {
    if (blk_thread >= 0 && blk_len) {
        if (hl_writer_events_v2(w, (uint32_t)blk_thread, blk_round, tbytes[blk_thread], &clk,
                                blk_data, blk_len))
            die(hl_writer_error(w));
        tbytes[blk_thread] += blk_len;
    }
    blk_thread = -1;
    blk_len = 0;
    if (inh_open && hl_writer_inherited(w, inh_time, inh_n, inh, inh_len)) die(hl_writer_error(w));
    inh_open = 0;
}

static void row_v2(tok_t *t, int n) {
    if (blk_thread < 0) die("row outside a block");
    hl_row_t r = {0};
    r.kind = (unsigned)kind_of(t[1].key);
    tok_t *f;
    if ((f = field(t, n, "time"))) r.has_time = 1, r.tick = parse_num((char *)f->val);
    if ((f = field(t, n, "edge"))) r.has_edge = 1, pair(f, &r.edge_thread, &r.edge_steps);
    if ((f = field(t, n, "edge2"))) r.has_edge2 = 1, pair(f, &r.edge2_thread, &r.edge2_steps);
    if ((f = field(t, n, "old"))) r.old = parse_num((char *)f->val);
    if ((f = field(t, n, "size"))) r.size = parse_num((char *)f->val);
    if ((f = field(t, n, "align"))) r.align = parse_num((char *)f->val);
    if ((f = field(t, n, "addr"))) r.addr = parse_num((char *)f->val);
    if ((f = field(t, n, "stack"))) r.stack = (uint32_t)parse_num((char *)f->val);
    if (blk_len + HL_ENC_MAX_ROW > sizeof blk_data) die("block too big");
    uint8_t *end = hl_enc_row(blk_data + blk_len, &encs[blk_thread], &r);
    blk_len = (size_t)(end - blk_data);
    total_rows++;
}

/* Stacks the writer was given, for interning by frames as the Rust writer does. */
static hl_frame_t *stacks[4096];
static unsigned stack_n[4096], nstacks;

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: hltrace-script SCRIPT OUT.hltrace\n");
        return 2;
    }
    FILE *in = fopen(argv[1], "r");
    if (!in) {
        perror(argv[1]);
        return 1;
    }
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror(argv[2]);
        return 1;
    }
    hl_meta_t meta = {0};
    hl_bytes_t args[256];
    int meta_lines = 0;
    hl_writer_opts_t opts = {0, 65536};
    hl_writer_t *w = NULL;
    static char line[65536];
    static tok_t t[300];
    while (fgets(line, sizeof line, in)) {
        lineno++;
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r' || line[l - 1] == ' '))
            line[--l] = 0;
        if (!l || line[0] == '#') continue;
        int n = tokenize(line, t, 300);
        const char *word = t[0].key;
        if (!strcmp(word, "meta")) {
            meta_lines++;
            if (meta_lines == 1) {
                meta.pid = num(t, n, "pid");
                tok_t *pp = field(t, n, "ppid");
                if (!pp) die("missing ppid");
                if (strcmp((char *)pp->val, "-"))
                    meta.has_ppid = 1, meta.ppid = parse_num((char *)pp->val);
                meta.start_ns = num(t, n, "start_ns");
                meta.pointer_size = num(t, n, "pointer_size");
                tok_t *en = field(t, n, "endian");
                meta.endian = en && !strcmp((char *)en->val, "big");
                meta.time_unit_ns = num(t, n, "time_unit_ns");
                meta.stack_depth = num(t, n, "stack_depth");
            } else if (meta_lines == 2) {
                meta.argc = 0;
                if (strcmp(line, "meta argv=")) {
                    for (int i = 1; i < n; i++) {
                        uint8_t *p = malloc(t[i].vlen + 1);
                        memcpy(p, t[i].val, t[i].vlen);
                        args[meta.argc++] = (hl_bytes_t){p, t[i].vlen};
                    }
                }
                meta.argv = args;
            } else {
                meta.recorder = opt_str(t, n, "recorder");
                meta.executable = opt_str(t, n, "executable");
                meta.options = opt_str(t, n, "options");
                meta.clock = opt_str(t, n, "clock");
                tok_t *pp = field(t, n, "parent_pid");
                if (!pp) die("missing parent_pid");
                if (strcmp((char *)pp->val, "-"))
                    meta.has_parent_pid = 1, meta.parent_pid = parse_num((char *)pp->val);
            }
            continue;
        }
        if (!strcmp(word, "hltrace") || !strcmp(word, "skipped")) continue;
        if (!strcmp(word, "writer")) {
            tok_t *vv = field(t, n, "version");
            if (vv) v2 = parse_num((char *)vv->val) == 2;
            tok_t *c = field(t, n, "codec");
            if (c) opts.zstd_level = strcmp((char *)c->val, "zstd") ? 0 : 3;
            if (field(t, n, "block_events"))
                opts.block_events = (uint32_t)num(t, n, "block_events");
            continue;
        }
        if (!w) {
            w = (v2 ? hl_writer_new_v2 : hl_writer_new)(&hl_mem_mmap, hl_fd_write,
                                                         (void *)(intptr_t)fd, &meta, &opts);
            if (!w) die(strerror(errno));
        }
        int rc = 0;
        if (v2 && !strcmp(word, "row")) {
            row_v2(t, n);
            continue;
        }
        if (v2 && !strcmp(word, "obj")) {
            if (!inh_open) die("obj outside an inherited block");
            unsigned k = (unsigned)kind_of(t[1].key);
            tok_t *al = field(t, n, "align");
            uint8_t *e = hl_enc_inherited(inh + inh_len, k, num(t, n, "size"),
                                          al ? parse_num((char *)al->val) : 0, num(t, n, "addr"),
                                          (uint32_t)num(t, n, "stack"));
            inh_len = (size_t)(e - inh);
            inh_n++;
            continue;
        }
        if (v2) flush_v2(w);
        if (v2 && !strcmp(word, "block")) {
            blk_thread = (int64_t)num(t, n, "thread");
            if (blk_thread >= 256) die("thread index too large for this tool");
            blk_round = num(t, n, "round");
            continue;
        }
        if (v2 && !strcmp(word, "clock")) {
            clk.tsc_ref = num(t, n, "tsc_ref");
            clk.ns_ref = num(t, n, "ns_ref");
            clk.mult = num(t, n, "mult");
            continue;
        }
        if (v2 && !strcmp(word, "inherited")) {
            inh_open = 1;
            inh_time = num(t, n, "time_ns");
            inh_len = inh_n = 0;
            continue;
        }
        if (!strcmp(word, "module")) {
            uint8_t bid[2048];
            tok_t *b = field(t, n, "build_id"), *p = field(t, n, "path");
            if (!b || !p) die("module needs path= and build_id=");
            size_t bl = unhex(b, bid);
            rc = hl_writer_module(w, num(t, n, "base"), num(t, n, "size"), p->val, p->vlen, bid,
                                  bl) < 0;
        } else if (!strcmp(word, "thread")) {
            tok_t *nm = field(t, n, "name");
            if (!nm) die("thread needs name=");
            tok_t *st = field(t, n, "start");
            uint32_t sth = 0;
            uint64_t sts = 0;
            if (st) pair(st, &sth, &sts);
            rc = hl_writer_thread_v2(w, num(t, n, "tid"), nm->val, nm->vlen, st != NULL, sth, sts) < 0;
        } else if (!strcmp(word, "stack")) {
            hl_frame_t fr[HL_MAX_FRAMES];
            unsigned nf = 0;
            for (int i = 2; i < n; i++) {
                const char *s = !strcmp(t[i].key, "frames") ? (const char *)t[i].val : t[i].key;
                const char *colon = strchr(s, ':');
                if (!colon || nf == HL_MAX_FRAMES) die("bad frame");
                char mod[32];
                if ((size_t)(colon - s) >= sizeof mod) die("bad frame");
                memcpy(mod, s, (size_t)(colon - s));
                mod[colon - s] = 0;
                fr[nf].module = (uint32_t)parse_num(mod);
                fr[nf].offset = parse_num(colon + 1);
                nf++;
            }
            unsigned found = 0;
            for (unsigned i = 0; i < nstacks && !found; i++)
                if (stack_n[i] == nf && !memcmp(stacks[i], fr, nf * sizeof *fr)) found = i + 1;
            if (!found && nf) {
                if (nstacks == 4096) die("too many stacks");
                rc = hl_writer_stack(w, fr, nf) < 0;
                stacks[nstacks] = malloc(nf * sizeof *fr);
                memcpy(stacks[nstacks], fr, nf * sizeof *fr);
                stack_n[nstacks++] = nf;
            }
        } else if (!strcmp(word, "event")) {
            if (n < 3) die("no kind");
            hl_event_t ev = {0};
            int kind = -1;
            for (int k = 0; k < HL_KIND_COUNT; k++)
                if (!strcmp(t[2].key, hl_kind_name(k))) kind = k;
            if (kind < 0) die("unknown kind");
            ev.kind = (uint8_t)kind;
            tok_t *o = field(t, n, "old");
            if (o && strcmp((char *)o->val, "null"))
                ev.has_old = 1, ev.old = parse_num((char *)o->val);
            ev.thread = (uint32_t)num(t, n, "thread");
            ev.time = num(t, n, "time");
            if (!hl_kind_is_release(kind)) ev.size = num(t, n, "size");
            if (hl_kind_has_align(kind)) ev.align = num(t, n, "align");
            ev.stack = (uint32_t)num(t, n, "stack");
            ev.failed = field(t, n, "failed") != NULL;
            ev.inherited = field(t, n, "inherited") != NULL;
            uint64_t id;
            rc = hl_writer_event(w, &ev, &id);
            if (!rc && field(t, n, "id") && id != num(t, n, "id"))
                die("the writer assigned another id");
        } else if (!strcmp(word, "flush")) {
            rc = hl_writer_flush(w);
        } else if (!strcmp(word, "raw_block")) {
            static uint8_t payload[65536];
            tok_t *p = field(t, n, "payload");
            if (!p) die("raw_block needs payload=");
            size_t pl = unhex(p, payload);
            rc = hl_writer_raw_block(w, (uint8_t)num(t, n, "kind"), (uint16_t)num(t, n, "flags"),
                                     payload, pl);
        } else if (!strcmp(word, "end")) {
            hl_end_t e = {0};
            tok_t *rs = field(t, n, "reason");
            if (!rs) die("end needs reason=");
            e.reason = 0;
            for (uint64_t r = 1; r <= 4; r++)
                if (!strcmp((char *)rs->val, hl_end_reason_name(r))) e.reason = r;
            if (!e.reason) e.reason = parse_num((char *)rs->val);
            e.status = num(t, n, "status");
            e.end_ns = num(t, n, "end_ns");
            e.unrecorded = num(t, n, "unrecorded");
            if (v2) {
                e.events = total_rows;
                e.lost = num(t, n, "lost");
                e.waited_ns = num(t, n, "waited_ns");
                e.inflight = num(t, n, "inflight");
            } else {
                e.unknown_frees = num(t, n, "unknown_frees");
            }
            rc = hl_writer_end(w, &e);
        } else {
            die("unknown line kind");
        }
        if (rc) die(hl_writer_error(w));
    }
    if (!w)
        w = (v2 ? hl_writer_new_v2 : hl_writer_new)(&hl_mem_mmap, hl_fd_write, (void *)(intptr_t)fd,
                                                     &meta, &opts);
    if (w && v2) flush_v2(w);
    if (!w || hl_writer_flush(w)) die("cannot finish the trace");
    hl_writer_free(w);
    close(fd);
    fclose(in);
    return 0;
}
