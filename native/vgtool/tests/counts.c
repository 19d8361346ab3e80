/*
 * counts: a known number of heap loads and stores of known sizes, for
 * crates/heaplab-refs/tests/vgtool.rs. Every heap access goes through a
 * volatile pointer (one IR load or store each) or an asm block, and the
 * program calls nothing that allocates besides what it does here (no stdio).
 *
 *   a = malloc(100)       25 stores of 4 B at 0,4,..96; 10 loads of 1 B at 0..9;
 *                         3 loads of 8 B at 64,72,80; 1 store and 1 load of 16 B
 *                         at 16 (SSE)
 *   b = calloc(10, 8)     7 stores of 8 B at 0..48
 *   c = realloc(b, 200)   5 loads of 2 B at 190,192,..198 (the copy is the
 *                         recorder's, not the program's: no references)
 *   d = malloc(24)        in one asm block: a store of 8 B at 0, a loop of
 *                         exactly 12001 instructions, a store of 8 B at 8
 *   a, c and d freed; then 4 objects referenced in turn (e0..e3 = malloc(8)
 *   each, 3 rounds of one 8-byte load from each)
 */
#include <emmintrin.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    char *a = malloc(100);
    for (int i = 0; i < 25; i++)
        ((volatile int *)a)[i] = i;
    long sum = 0;
    for (int i = 0; i < 10; i++)
        sum += ((volatile char *)a)[i];
    for (int i = 0; i < 3; i++)
        sum += ((volatile long *)(a + 64))[i];
    __m128i v = _mm_set1_epi32(7);
    __asm__ volatile("movdqu %0, (%1)" : : "x"(v), "r"(a + 16) : "memory");
    __asm__ volatile("movdqu (%1), %0" : "=x"(v) : "r"(a + 16) : "memory");
    sum += _mm_cvtsi128_si32(v);

    long *b = calloc(10, 8);
    for (int i = 0; i < 7; i++)
        ((volatile long *)b)[i] = i;
    char *c = realloc(b, 200);
    for (int i = 0; i < 5; i++)
        sum += ((volatile short *)(c + 190))[i];

    char *d = malloc(24);
    __asm__ volatile("movq $1, (%0)\n\t"
                     "mov $1000, %%ecx\n"
                     "1:\n\t"
                     "nop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\t"
                     "dec %%ecx\n\t"
                     "jnz 1b\n\t"
                     "movq $2, 8(%0)\n\t"
                     :
                     : "r"(d)
                     : "ecx", "memory");
    free(a);
    free(c);
    free(d);

    long *e[4];
    for (int i = 0; i < 4; i++)
        e[i] = malloc(8);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 4; i++)
            sum += *(volatile long *)e[i];
    for (int i = 0; i < 4; i++)
        free(e[i]);
    return sum == 12345 ? 1 : 0; /* uses sum; never 12345 */
}
