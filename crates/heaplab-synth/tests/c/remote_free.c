/*
 * remote_free.c OFFSET: a 24-byte block made by the main thread and freed by
 * another at its address plus OFFSET bytes, then "freed" on stdout.  With
 * OFFSET 0 the free is a remote free of a fast block (the owner's lock-free
 * stack); with a misaligned OFFSET, or one that lands above the slabs the
 * class has taken, the fast core's remote check must stop the program with
 * a fatal error naming the pointer rather than push it (fastcore.c,
 * remote_check).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static char *block;

static void *freer(void *arg) {
    free(block + (long)arg);
    return NULL;
}

int main(int argc, char **argv) {
    long off = argc > 1 ? atol(argv[1]) : 0;
    block = malloc(24);
    if (!block) return 2;
    block[0] = 1;
    pthread_t t;
    if (pthread_create(&t, NULL, freer, (void *)off) != 0) return 3;
    pthread_join(t, NULL);
    printf("freed\n");
    return 0;
}
