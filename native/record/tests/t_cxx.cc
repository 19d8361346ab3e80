// t_cxx: C++ new and delete reach the trace (through libstdc++'s operator
// new -> malloc): scalar, array, aligned and nothrow forms, and a growing
// std::vector and std::string.
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <unistd.h>
#include <vector>

#define MARK_BEGIN 987654321
#define MARK_END   987654322

struct alignas(64) Wide {
    char b[100];
};

static char out[4096];
static size_t len;
static void say(const char *s) {
    for (; *s; s++)
        out[len++] = *s;
}

int main() {
    void *begin = malloc(MARK_BEGIN);
    say("begin\n");
    int *one = new int(5);
    say("malloc 4 -> #0\n");
    double *arr = new double[100];
    say("malloc 800 -> #1\n");
    Wide *w = new Wide;
    say("aligned_alloc 128 64 -> #2\n");
    char *nt = new (std::nothrow) char[77];
    say("malloc 77 -> #3\n");
    delete one;
    say("free #0\n");
    delete[] arr;
    say("free #1\n");
    delete w;
    say("free #2\n");
    delete[] nt;
    say("free #3\n");
    void *end = malloc(MARK_END);
    free(end);
    free(begin);
    say("end\n");
    {
        std::vector<int> v;
        for (int i = 0; i < 1000; i++)
            v.push_back(i);
        std::string s;
        for (int i = 0; i < 200; i++)
            s += "abcdef";
        if (v.size() != 1000 || s.size() != 1200) return 1;
    }
    if (write(1, out, len) != (ssize_t)len) return 1;
    return 0;
}
