/* t_fork: fork without exec, from a process with a second thread busy
 * allocating. The parent keeps 10 objects live across the fork; the child
 * frees 3 of them, allocates 5 and exits with status 7. Prints
 * "child=PID" and, from the parent, "parent done". */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static _Atomic int stop;

static void *busy(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        void *p = malloc(64);
        free(p);
    }
    return NULL;
}

int main(void) {
    void *keep[10];
    for (int i = 0; i < 10; i++)
        keep[i] = malloc(1000 + (size_t)i);
    pthread_t t;
    pthread_create(&t, NULL, busy, NULL);
    usleep(20000);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 3; i++)
            free(keep[i]);
        void *mine[5];
        for (int i = 0; i < 5; i++)
            mine[i] = malloc(5000 + (size_t)i);
        free(mine[0]);
        _exit(7);
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    int st = 0;
    waitpid(pid, &st, 0);
    for (int i = 0; i < 10; i++)
        free(keep[i]);
    char line[64];
    int n = snprintf(line, sizeof line, "child=%d status=%d\n", (int)pid,
                     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    if (write(1, line, (size_t)n) != n) return 1;
    return 0;
}
