/* t_exec: an exec that fails (the trace goes on after END exec), then one
 * that succeeds: the new image (this program with argument "second")
 * allocates and exits with status 3. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "second")) {
        void *p = malloc(777);
        free(p);
        p = malloc(778);
        return 3;
    }
    void *a = malloc(111);
    char *const bad[] = {"/nonexistent/program", NULL};
    execv(bad[0], bad);
    if (errno != ENOENT) return 20;
    free(a);
    void *b = malloc(222);
    (void)b;
    execl(argv[0], argv[0], "second", (char *)NULL);
    return 21;
}
