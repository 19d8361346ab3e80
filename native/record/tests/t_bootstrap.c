/* t_bootstrap: calls made before main from a constructor that runs before
 * the agent's own (priority 101), plus dlsym/dlerror, which allocate inside
 * libc. With HEAPLAB_RECORD_TEST_BOOT=1 the agent also serves two calls from
 * its bootstrap buffer while resolving, as dlsym does on older glibc, and
 * checks that free, realloc and malloc_usable_size recognise those blocks. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *early;

__attribute__((constructor(101))) static void first(void) {
    early = calloc(10, 10);
}

int main(void) {
    if (!early) return 1;
    void *h = dlsym(RTLD_DEFAULT, "no_such_symbol_anywhere");
    const char *e = dlerror();
    if (h || !e) return 2;
    early = realloc(early, 1000);
    free(early);
    if (write(1, "ok\n", 3) != 3) return 3;
    return 0;
}
