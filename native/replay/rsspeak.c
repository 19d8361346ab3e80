/*
 * rsspeak.c: libheaplab-rsspeak.so, preloaded beside the allocator by
 * `heaplab compare --live` to learn a program's peak resident set.
 *
 * wait4's ru_maxrss is no good for this: the kernel folds the RSS of the
 * image a process had before it called exec (for a child spawned by a large
 * parent, the parent's) into the child's maximum.  The high-water mark of
 * the program's own address space is VmHWM in /proc/self/status, which exec
 * starts afresh; this library reads it in a destructor, as the program exits,
 * and writes it (in bytes, one line) to the file named by $HEAPLAB_RSS_OUT.
 * It defines no malloc and calls none: open, read, write only.
 */
#include "hl_fmt.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((destructor)) static void report_peak(void) {
    const char *out = getenv("HEAPLAB_RSS_OUT");
    if (!out || !*out)
        return;
    static char text[8192];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return;
    text[n] = 0;
    const char *s = strstr(text, "VmHWM:");
    if (!s)
        return;
    s += 6;
    while (*s == ' ' || *s == '\t')
        s++;
    unsigned long long kb = 0;
    while (*s >= '0' && *s <= '9')
        kb = kb * 10 + (unsigned long long)(*s++ - '0');
    char line[HL_FMT_MAX + 1];
    size_t len = hl_fmt_u(line, kb * 1024);
    line[len++] = '\n';
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (write(fd, line, len) < 0) {
    }
    close(fd);
}
