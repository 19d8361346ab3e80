/*
 * reuse: blocks freed and then handed out again at the same address must be
 * told apart. For crates/heaplab-refs/tests/vgtool.rs:
 *
 *   p = malloc(32); 2 stores of 8 B at 0 and 8; free(p)
 *   1 load of 8 B at p after the free (freed memory: no object's)
 *   q = malloc(32), which must land at p (exit 3 otherwise); 3 loads of 8 B
 *   at 0, 8, 16; free(q)
 */
#include <stdint.h>
#include <stdlib.h>

int main(void) {
    char *p = malloc(32);
    ((volatile long *)p)[0] = 1;
    ((volatile long *)p)[1] = 2;
    uintptr_t where = (uintptr_t)p;
    free(p);
    long sum = *(volatile long *)where; /* after the free */
    char *q = malloc(32);
    if ((uintptr_t)q != where) return 3;
    for (int i = 0; i < 3; i++)
        sum += ((volatile long *)q)[i];
    free(q);
    return sum == 12345 ? 1 : 0;
}
