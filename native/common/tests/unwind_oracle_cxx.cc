// unwind_oracle_cxx.cc: hl_unwind against libunwind in C++ code: frames with
// a personality routine and LSDA (zPLR CIEs), virtual calls, templates,
// std::function, lambdas, frames unwound by a thrown exception before, and
// walks from inside a replaced operator new (as the agent and an allocator
// see C++ `new`). Built -O2 -fomit-frame-pointer.
//
//   unwind-oracle-cxx [ITERATIONS]     exit 0: every walk equal; 1: a mismatch
#include "unwind_check.h"

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static thread_local uc_result_t res;
static thread_local bool in_new;
static thread_local unsigned long rng = 7;
static thread_local bool check_new;

static unsigned next() {
    rng = rng * 6364136223846793005ul + 1442695040888963407ul;
    return (unsigned)(rng >> 33);
}

void *operator new(std::size_t n) {
    if (check_new && !in_new) {
        in_new = true;
        uc_compare(UC_MAX, &res);
        in_new = false;
    }
    void *p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
void operator delete(void *p) noexcept {
    std::free(p);
}
void operator delete(void *p, std::size_t) noexcept {
    std::free(p);
}

struct Node {
    virtual ~Node() = default;
    virtual int go(int d) = 0;
};

template <int K> struct Step : Node {
    std::vector<std::unique_ptr<Node>> *kids;
    int go(int d) override;
};

static std::vector<std::unique_ptr<Node>> nodes;

template <int K> __attribute__((noinline)) int Step<K>::go(int d) {
    std::string s(40 + K, 'x'); // a destructor to run: an LSDA
    if (d <= 0) {
        uc_compare(UC_MAX, &res);
        check_new = true;
        auto *m = new std::map<int, std::string>{{K, s}}; // walks from operator new
        check_new = false;
        int r = (int)m->size();
        delete m;
        return r;
    }
    try {
        if (next() % 17 == 0) throw std::runtime_error("unwound by the exception");
        std::function<int(int)> f = [](int e) { return nodes[next() % nodes.size()]->go(e); };
        return f(d - 1) + (int)s.size();
    } catch (const std::runtime_error &) {
        return nodes[next() % nodes.size()]->go(d - 1);
    }
}

static void run(int iters) {
    for (int i = 0; i < iters; i++)
        nodes[next() % nodes.size()]->go((int)(next() % 10));
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
    nodes.emplace_back(new Step<0>);
    nodes.emplace_back(new Step<1>);
    nodes.emplace_back(new Step<2>);
    nodes.emplace_back(new Step<3>);
    std::vector<uc_result_t> results(3);
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; t++)
        ts.emplace_back([t, iters, &results] {
            rng = 100 + t;
            run(iters);
            results[t] = res;
        });
    run(iters);
    for (auto &t : ts)
        t.join();
    results.push_back(res);
    unsigned long walks = 0, bad = 0, frames = 0;
    for (auto &r : results) {
        walks += r.walks;
        bad += r.mismatches;
        frames += r.frames;
    }
    std::printf("unwind-oracle-cxx: %lu walks, %lu frames, %lu mismatches\n", walks, frames, bad);
    return bad || !walks ? 1 : 0;
}
