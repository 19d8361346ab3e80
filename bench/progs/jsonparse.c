/*
 * jsonparse: an allocation-bound parser for benchmarks (not a test).  It
 * reads a JSON document into a tree the way small JSON libraries do (cJSON,
 * jansson): a malloc'd node per value, a malloc'd copy of every string and
 * key, arrays and objects whose member arrays grow by realloc.  Then it
 * walks the tree (sums, counts, the longest string), re-serializes it into a
 * growing buffer, parses that again, compares the two trees, and frees
 * everything; PASSES times.  Most objects are small and short-lived, and
 * their sizes follow the document's: a different document asks for
 * different sizes.
 *
 *   jsonparse --gen RECORDS SEED > doc.json   a document of RECORDS records
 *   jsonparse doc.json [PASSES]               parse it PASSES times (default 3)
 *
 * Output: one line of totals, the same under every allocator.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jval {
    jtype t;
    union {
        int b;
        double num;
        struct {
            char *s;
            size_t len;
        } str;
        struct {
            struct jval **items;
            char **keys; /* objects only */
            size_t n, cap;
        } list;
    } u;
} jval;

static void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        fputs("out of memory\n", stderr);
        exit(2);
    }
    return p;
}

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n);
    if (!q) {
        fputs("out of memory\n", stderr);
        exit(2);
    }
    return q;
}

/* ---- the parser ---- */

typedef struct {
    const char *s, *end;
} src;

static void ws(src *r) {
    while (r->s < r->end && (*r->s == ' ' || *r->s == '\n' || *r->s == '\t' || *r->s == '\r'))
        r->s++;
}

static void fail(const char *what) {
    fprintf(stderr, "jsonparse: bad document: %s\n", what);
    exit(1);
}

static jval *node(jtype t) {
    jval *v = xmalloc(sizeof *v);
    memset(v, 0, sizeof *v);
    v->t = t;
    return v;
}

static char *pstring(src *r, size_t *len) {
    if (*r->s != '"') fail("expected a string");
    r->s++;
    size_t cap = 16, n = 0;
    char *b = xmalloc(cap);
    while (r->s < r->end && *r->s != '"') {
        char c = *r->s++;
        if (c == '\\' && r->s < r->end) {
            c = *r->s++;
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
        }
        if (n + 1 >= cap) b = xrealloc(b, cap *= 2);
        b[n++] = c;
    }
    if (r->s >= r->end) fail("unterminated string");
    r->s++;
    b[n] = 0;
    /* Shrink to fit, as libraries that keep the strings do. */
    b = xrealloc(b, n + 1);
    *len = n;
    return b;
}

static void push(jval *v, jval *item, char *key) {
    if (v->u.list.n == v->u.list.cap) {
        v->u.list.cap = v->u.list.cap ? 2 * v->u.list.cap : 4;
        v->u.list.items = xrealloc(v->u.list.items, v->u.list.cap * sizeof *v->u.list.items);
        if (v->t == J_OBJ) v->u.list.keys = xrealloc(v->u.list.keys, v->u.list.cap * sizeof(char *));
    }
    if (v->t == J_OBJ) v->u.list.keys[v->u.list.n] = key;
    v->u.list.items[v->u.list.n++] = item;
}

static jval *parse(src *r) {
    ws(r);
    if (r->s >= r->end) fail("unexpected end");
    char c = *r->s;
    if (c == '{' || c == '[') {
        jval *v = node(c == '{' ? J_OBJ : J_ARR);
        char close = c == '{' ? '}' : ']';
        r->s++;
        ws(r);
        if (r->s < r->end && *r->s == close) {
            r->s++;
            return v;
        }
        for (;;) {
            char *key = NULL;
            if (v->t == J_OBJ) {
                ws(r);
                size_t kl;
                key = pstring(r, &kl);
                ws(r);
                if (r->s >= r->end || *r->s != ':') fail("expected ':'");
                r->s++;
            }
            push(v, parse(r), key);
            ws(r);
            if (r->s < r->end && *r->s == ',') {
                r->s++;
                continue;
            }
            if (r->s < r->end && *r->s == close) {
                r->s++;
                return v;
            }
            fail("expected ',' or a closing bracket");
        }
    }
    if (c == '"') {
        jval *v = node(J_STR);
        v->u.str.s = pstring(r, &v->u.str.len);
        return v;
    }
    if (!strncmp(r->s, "true", 4) || !strncmp(r->s, "false", 5)) {
        jval *v = node(J_BOOL);
        v->u.b = *r->s == 't';
        r->s += v->u.b ? 4 : 5;
        return v;
    }
    if (!strncmp(r->s, "null", 4)) {
        r->s += 4;
        return node(J_NULL);
    }
    char *e;
    double d = strtod(r->s, &e);
    if (e == r->s) fail("expected a value");
    r->s = e;
    jval *v = node(J_NUM);
    v->u.num = d;
    return v;
}

static void jfree(jval *v) {
    if (v->t == J_STR) free(v->u.str.s);
    if (v->t == J_ARR || v->t == J_OBJ) {
        for (size_t i = 0; i < v->u.list.n; i++) {
            jfree(v->u.list.items[i]);
            if (v->t == J_OBJ) free(v->u.list.keys[i]);
        }
        free(v->u.list.items);
        free(v->u.list.keys);
    }
    free(v);
}

/* ---- walking, writing, comparing ---- */

typedef struct {
    double sum;
    unsigned long values, keys, longest;
} totals;

static void walk(const jval *v, totals *t) {
    t->values++;
    if (v->t == J_NUM) t->sum += v->u.num;
    if (v->t == J_STR && v->u.str.len > t->longest) t->longest = v->u.str.len;
    if (v->t == J_ARR || v->t == J_OBJ)
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (v->t == J_OBJ) t->keys++;
            walk(v->u.list.items[i], t);
        }
}

typedef struct {
    char *b;
    size_t n, cap;
} buf;

static void put(buf *o, const char *s, size_t n) {
    if (o->n + n + 1 > o->cap) {
        while (o->n + n + 1 > o->cap)
            o->cap = o->cap ? 2 * o->cap : 256;
        o->b = xrealloc(o->b, o->cap);
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
    o->b[o->n] = 0;
}

static void putstr(buf *o, const char *s, size_t n) {
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\') put(o, "\\", 1);
        if (s[i] == '\n') {
            put(o, "\\n", 2);
            continue;
        }
        put(o, s + i, 1);
    }
    put(o, "\"", 1);
}

static void write_json(const jval *v, buf *o) {
    char num[64];
    switch (v->t) {
    case J_NULL:
        put(o, "null", 4);
        break;
    case J_BOOL:
        put(o, v->u.b ? "true" : "false", v->u.b ? 4 : 5);
        break;
    case J_NUM:
        put(o, num, (size_t)snprintf(num, sizeof num, "%.17g", v->u.num));
        break;
    case J_STR:
        putstr(o, v->u.str.s, v->u.str.len);
        break;
    case J_ARR:
    case J_OBJ:
        put(o, v->t == J_ARR ? "[" : "{", 1);
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i) put(o, ",", 1);
            if (v->t == J_OBJ) {
                putstr(o, v->u.list.keys[i], strlen(v->u.list.keys[i]));
                put(o, ":", 1);
            }
            write_json(v->u.list.items[i], o);
        }
        put(o, v->t == J_ARR ? "]" : "}", 1);
        break;
    }
}

static int same(const jval *a, const jval *b) {
    if (a->t != b->t) return 0;
    switch (a->t) {
    case J_NULL:
        return 1;
    case J_BOOL:
        return a->u.b == b->u.b;
    case J_NUM:
        return a->u.num == b->u.num;
    case J_STR:
        return a->u.str.len == b->u.str.len && !memcmp(a->u.str.s, b->u.str.s, a->u.str.len);
    default:
        if (a->u.list.n != b->u.list.n) return 0;
        for (size_t i = 0; i < a->u.list.n; i++) {
            if (a->t == J_OBJ && strcmp(a->u.list.keys[i], b->u.list.keys[i])) return 0;
            if (!same(a->u.list.items[i], b->u.list.items[i])) return 0;
        }
        return 1;
    }
}

/* ---- the generator ---- */

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char *words[] = {"alpha", "beta",  "gamma",   "delta",  "epsilon", "zeta",
                              "eta",   "theta", "iota",    "kappa",  "lambda",  "mu",
                              "nu",    "xi",    "omicron", "pi",     "rho",     "sigma",
                              "tau",   "upsilon", "phi",   "chi",    "psi",     "omega"};
#define NWORDS (sizeof words / sizeof *words)

static void gen_text(unsigned n) {
    putchar('"');
    for (unsigned i = 0; i < n; i++)
        printf("%s%s", i ? " " : "", words[next() % NWORDS]);
    putchar('"');
}

static void gen_value(int depth) {
    unsigned k = (unsigned)(next() % (depth > 2 ? 5 : 8));
    switch (k) {
    case 0:
        printf("%ld", (long)(next() % 100000) - 50000);
        break;
    case 1:
        printf("%.3f", (double)(next() % 1000000) / 1000.0);
        break;
    case 2:
        gen_text(1 + (unsigned)(next() % 12));
        break;
    case 3:
        fputs(next() % 2 ? "true" : "null", stdout);
        break;
    case 4:
        gen_text(1 + (unsigned)(next() % 3));
        break;
    case 5:
    case 6: {
        unsigned n = (unsigned)(next() % 6);
        putchar('[');
        for (unsigned i = 0; i < n; i++) {
            if (i) putchar(',');
            gen_value(depth + 1);
        }
        putchar(']');
        break;
    }
    default: {
        unsigned n = 1 + (unsigned)(next() % 5);
        putchar('{');
        for (unsigned i = 0; i < n; i++) {
            printf("%s\"%s_%u\":", i ? "," : "", words[next() % NWORDS], i);
            gen_value(depth + 1);
        }
        putchar('}');
    }
    }
}

static int generate(unsigned records, uint64_t seed) {
    rng ^= seed * 0x9E3779B97F4A7C15ull;
    if (!rng) rng = 1;
    fputs("{\"records\":[", stdout);
    for (unsigned r = 0; r < records; r++) {
        printf("%s{\"id\":%u,\"name\":", r ? ",\n" : "", r);
        gen_text(1 + (unsigned)(next() % 4));
        fputs(",\"tags\":[", stdout);
        unsigned nt = (unsigned)(next() % 5);
        for (unsigned i = 0; i < nt; i++)
            printf("%s\"%s\"", i ? "," : "", words[next() % NWORDS]);
        fputs("],\"data\":", stdout);
        gen_value(0);
        putchar('}');
    }
    fputs("]}\n", stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--gen"))
        return generate((unsigned)strtoul(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
    if (argc < 2 || argc > 3) {
        fputs("usage: jsonparse FILE [PASSES] | jsonparse --gen RECORDS SEED\n", stderr);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    buf in = {0};
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        put(&in, chunk, k);
    fclose(f);
    int passes = argc == 3 ? atoi(argv[2]) : 3;
    totals t = {0};
    unsigned long bytes = 0;
    for (int p = 0; p < passes; p++) {
        src r = {in.b, in.b + in.n};
        jval *doc = parse(&r);
        walk(doc, &t);
        buf out = {0};
        write_json(doc, &out);
        bytes += out.n;
        src r2 = {out.b, out.b + out.n};
        jval *again = parse(&r2);
        if (!same(doc, again)) {
            fputs("jsonparse: the document changed when written and read again\n", stderr);
            return 3;
        }
        jfree(again);
        free(out.b);
        jfree(doc);
    }
    free(in.b);
    printf("values %lu keys %lu longest %lu written %lu sum %.3f\n", t.values, t.keys, t.longest,
           bytes, t.sum);
    return 0;
}
