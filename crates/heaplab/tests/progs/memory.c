/*
 * Known answers for `heaplab stats` (crates/heaplab/tests/memory.rs):
 *
 *   memory LEAKS CHURN
 *
 *   leak_some:  LEAKS nodes of 56 bytes, never freed (make_node's malloc)
 *   churn:      CHURN blocks of 32..95 bytes, each freed right after it is
 *               allocated: CHURN temporary allocations (heaptrack's definition)
 *   big_peak:   one block of 10 MiB, freed: the program's peak, in big_peak
 *
 * No stdio: its buffer would be one more allocation.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct node {
    struct node *next;
    char pad[48];
};
static struct node *volatile keep;

__attribute__((noinline)) struct node *make_node(void) {
    return malloc(sizeof(struct node)); /* LINE_MAKE_NODE */
}

__attribute__((noinline)) void leak_some(int n) {
    for (int i = 0; i < n; i++) {
        struct node *x = make_node();
        x->next = keep;
        keep = x;
        keep = 0;
    }
}

__attribute__((noinline)) void churn(int n) {
    for (int i = 0; i < n; i++) {
        char *volatile p = malloc(32 + i % 64); /* LINE_CHURN */
        p[0] = 1;
        free(p);
    }
}

__attribute__((noinline)) void big_peak(void) {
    char *volatile b = malloc(10 << 20); /* LINE_BIG_PEAK */
    memset(b, 1, 4096);
    free(b);
}

int main(int argc, char **argv) {
    int leaks = argc > 1 ? atoi(argv[1]) : 1000;
    int churns = argc > 2 ? atoi(argv[2]) : 50000;
    leak_some(leaks);
    churn(churns);
    big_peak();
    return write(1, "done\n", 5) == 5 ? 0 : 1;
}
