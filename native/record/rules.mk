# native/record: the LD_PRELOAD recording agent and its tests.
#
#   build/lib/libheaplab-record.so     the agent (README.md: design, environment)
#   build/lib/libheaplab-count.so      test tool: counts malloc-API calls, an oracle for the agent
#   build/bin/record-*                 test programs (C and C++)
#
#   make -C native record-test         run the agent's tests

RECORD_DIR  := $(NATIVE)/record
RECORD_OBJ  := $(OBJDIR)/record
RECORD_SRCS := hooks.c threads.c chunks.c edges.c stacks.c modules.c writer.c inherit.c agent.c os.c
RECORD_OBJS := $(addprefix $(RECORD_OBJ)/,$(RECORD_SRCS:.c=.o))
RECORD_CFLAGS := $(CFLAGS) -fvisibility=hidden -ftls-model=initial-exec -Werror -Wshadow \
                 -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc -fno-builtin-free \
                 $(shell pkg-config --cflags libunwind 2>/dev/null)

$(RECORD_OBJ)/%.o: $(RECORD_DIR)/%.c $(RECORD_DIR)/agent.h $(HLTRACE_HDRS) $(COMMON_DIR)/hl_unwind.h \
                  $(COMMON_DIR)/hl_fmt.h | dirs
	@mkdir -p $(RECORD_OBJ)
	$(CC) $(RECORD_CFLAGS) -c $< -o $@

$(LIBDIR)/libheaplab-record.so: $(RECORD_OBJS) $(HLTRACE_OBJ) $(HL_UNWIND_OBJ) $(RECORD_DIR)/exports.map
	$(CC) -shared -Wl,-z,now -Wl,--no-undefined -Wl,--version-script=$(RECORD_DIR)/exports.map \
	    -o $@ $(filter %.o,$^) -lunwind -lzstd -ldl -lpthread

$(LIBDIR)/libheaplab-count.so: $(RECORD_DIR)/tests/count_preload.c $(COMMON_DIR)/hl_fmt.h | dirs
	$(CC) $(CFLAGS) -fno-builtin -shared -o $@ $< -ldl -lpthread

RECORD_TESTS_C  := $(basename $(notdir $(wildcard $(RECORD_DIR)/tests/t_*.c)))
RECORD_TESTS_CC := $(basename $(notdir $(wildcard $(RECORD_DIR)/tests/t_*.cc)))
RECORD_TESTBIN  := $(addprefix $(BINDIR)/record-,$(RECORD_TESTS_C) $(RECORD_TESTS_CC)) \
                   $(BINDIR)/record-spawnjoin

# the benchmark's threads-that-come-and-go program, recorded 50 times by the tests
$(BINDIR)/record-spawnjoin: $(NATIVE)/../bench/progs/spawnjoin.c | dirs
	$(CC) $(CFLAGS) -O2 -o $@ $< -lpthread

$(BINDIR)/record-t_%: $(RECORD_DIR)/tests/t_%.c | dirs
	$(CC) $(CFLAGS) -O1 -fno-builtin -Wno-use-after-free -Wno-alloc-size-larger-than -o $@ $< -lpthread

$(BINDIR)/record-t_%: $(RECORD_DIR)/tests/t_%.cc | dirs
	$(CXX) $(CXXFLAGS) -O1 -fno-builtin -o $@ $< -lpthread

.PHONY: record record-test
record: $(LIBDIR)/libheaplab-record.so $(LIBDIR)/libheaplab-count.so $(RECORD_TESTBIN)

record-test: record $(BINDIR)/hltrace-dump
	$(RECORD_DIR)/tests/run.sh $(BUILD)

ALL_TARGETS  += record
TEST_TARGETS += record-test
