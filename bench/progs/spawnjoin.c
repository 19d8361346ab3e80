/*
 * spawnjoin: threads that come and go, with frees across them, for
 * benchmarks and for the recorder's test of threaded recordings (issue 17:
 * such a program once lost whole traces; native/record/tests/run.sh records
 * it 50 times). Not a test by itself.
 *
 *   spawnjoin [ROUNDS [N]]     default 10 rounds, N 4500: 180,000 calls
 *
 * Each round: the main thread allocates 2N objects; it creates 2 threads;
 * thread k frees the main thread's objects k*N .. (k+1)*N-1 (cross-thread
 * frees) and allocates N objects of its own; the main thread joins both and
 * frees what they allocated (cross-thread again). Sizes come from a fixed
 * formula, so every run makes the same calls (in a different interleaving:
 * the threads run concurrently); the checksum printed depends on the
 * formula only, never on addresses or on the interleaving.
 *
 *   calls per round: 2N malloc (main) + 2N free (threads) + 2N malloc
 *   (threads) + 2N free (main) = 8N, plus whatever pthread_create and the
 *   C library allocate for themselves
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned n = 4500;
static uint64_t **from_main, **from_thread[2];
static uint64_t sums[2];

static size_t size_of(unsigned round, unsigned i, unsigned k) {
    return 16 + 8 * ((round * 7 + i * 13 + k * 5) % 29);
}

typedef struct arg {
    unsigned k, round;
} arg_t;

static void *worker(void *p) {
    arg_t *a = p;
    uint64_t sum = 0;
    for (unsigned i = a->k * n; i < (a->k + 1) * n; i++) {
        sum += from_main[i][0];
        free(from_main[i]);
    }
    for (unsigned i = 0; i < n; i++) {
        uint64_t *o = malloc(size_of(a->round, i, a->k + 1));
        if (!o) exit(1);
        o[0] = (uint64_t)a->round * 1000003u + i * 7u + a->k;
        from_thread[a->k][i] = o;
    }
    sums[a->k] += sum;
    return NULL;
}

int main(int argc, char **argv) {
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 10;
    if (argc > 2) n = (unsigned)atoi(argv[2]);
    from_main = malloc(2 * n * sizeof *from_main);
    from_thread[0] = malloc(n * sizeof *from_thread[0]);
    from_thread[1] = malloc(n * sizeof *from_thread[1]);
    if (!from_main || !from_thread[0] || !from_thread[1]) return 1;
    uint64_t sum = 0;
    for (unsigned r = 0; r < rounds; r++) {
        for (unsigned i = 0; i < 2 * n; i++) {
            uint64_t *o = malloc(size_of(r, i, 0));
            if (!o) return 1;
            o[0] = (uint64_t)r * 999983u + i;
            from_main[i] = o;
        }
        pthread_t t[2];
        arg_t a[2] = {{0, r}, {1, r}};
        for (int k = 0; k < 2; k++)
            if (pthread_create(&t[k], NULL, worker, &a[k])) return 1;
        for (int k = 0; k < 2; k++)
            pthread_join(t[k], NULL);
        for (int k = 0; k < 2; k++)
            for (unsigned i = 0; i < n; i++) {
                sum += from_thread[k][i][0];
                free(from_thread[k][i]);
            }
    }
    free(from_main);
    free(from_thread[0]);
    free(from_thread[1]);
    printf("spawnjoin %u rounds of 2 threads, %u objects each, checksum %016llx\n", rounds, n,
           (unsigned long long)(sum + sums[0] * 3 + sums[1] * 5));
    return 0;
}
