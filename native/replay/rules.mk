# native/replay: the replayer and its tests.
#
#   build/bin/heaplab-replay               replays a trace against the malloc it has loaded
#   build/lib/libheaplab-test-bump.so      test allocator: a bump pointer, free does nothing
#   build/lib/libheaplab-test-overlap.so   test allocator, broken: hands out overlapping blocks
#   build/lib/libheaplab-test-corrupt.so   test allocator, broken: damages a live payload
#   build/lib/libheaplab-test-log.so       test allocator: logs every call and site hint it receives
#   build/lib/libheaplab-test-zoosite.so   test algorithm behind native/alloc's shim: logs the hints
#                                          the shim hands to hl_alloc_t.site_hint
#
#   build/lib/libheaplab-rsspeak.so       preloaded by compare --live: a program's peak RSS at exit
#
#   make -C native replay-test             run the replayer's tests

REPLAY_DIR  := $(NATIVE)/replay
REPLAY_OBJ  := $(OBJDIR)/replay
REPLAY_SRCS := main.c exec.c check.c cache.c fmt.c os.c refs.c count.c threads.c
REPLAY_OBJS := $(addprefix $(REPLAY_OBJ)/,$(REPLAY_SRCS:.c=.o))
ifeq ($(shell uname -m),x86_64)
REPLAY_OBJS += $(REPLAY_OBJ)/lean_x86_64.o
endif
REPLAY_CFLAGS := $(CFLAGS) -Werror -Wshadow -fno-builtin-malloc -fno-builtin-calloc \
                 -fno-builtin-realloc -fno-builtin-free -fno-plt
REPLAY_HDRS := $(REPLAY_DIR)/rp.h $(COMMON_DIR)/hltrace.h $(COMMON_DIR)/heaplab_site.h $(NATIVE)/alloc/hl_alloc.h \
               $(COMMON_DIR)/hl_fmt.h $(NATIVE)/vgtool/heaplab_vg.h

$(REPLAY_OBJ)/%.o: $(REPLAY_DIR)/%.c $(REPLAY_HDRS) | dirs
	@mkdir -p $(REPLAY_OBJ)
	$(CC) $(REPLAY_CFLAGS) -c $< -o $@

$(REPLAY_OBJ)/%.o: $(REPLAY_DIR)/%.S | dirs
	@mkdir -p $(REPLAY_OBJ)
	$(CC) -c $< -o $@

# -z now: no lazy binding, so the dynamic linker's resolver never runs inside
# the timed region (nor shows up as a callee under callgrind).
$(BINDIR)/heaplab-replay: $(REPLAY_OBJS) $(HLTRACE_OBJ)
	$(CC) -Wl,-z,now -o $@ $^ $(HLTRACE_LIBS) -lpthread

REPLAY_TESTLIBS := $(addprefix $(LIBDIR)/libheaplab-test-,bump.so overlap.so corrupt.so log.so)

$(LIBDIR)/libheaplab-test-%.so: $(REPLAY_DIR)/tests/%.c $(REPLAY_DIR)/tests/bumpcore.h $(COMMON_DIR)/heaplab_site.h $(COMMON_DIR)/hl_fmt.h | dirs
	$(CC) $(CFLAGS) -fno-builtin -shared -Wl,-z,now -o $@ $<

# The site-hint path through heaplab's own shim (native/alloc/rules.mk makes
# shim-zoosite.o, platform.o and pad.o).
$(REPLAY_OBJ)/zoosite.o: $(REPLAY_DIR)/tests/zoosite.c $(ALLOC_HEADERS) | dirs
	@mkdir -p $(REPLAY_OBJ)
	$(CC) $(ALLOC_CFLAGS) -I$(COMMON_DIR) -c $< -o $@

$(LIBDIR)/libheaplab-test-zoosite.so: $(ALLOC_OBJ)/shim-zoosite.o $(REPLAY_OBJ)/zoosite.o $(ALLOC_COMMON)
	$(CC) -shared -Wl,-z,now -Wl,--no-undefined -o $@ $^

REPLAY_TESTLIBS += $(LIBDIR)/libheaplab-test-zoosite.so

# Preloaded by `heaplab compare --live` beside the allocator: the program's
# own peak RSS (VmHWM) at exit (rsspeak.c says why not wait4's).
$(LIBDIR)/libheaplab-rsspeak.so: $(REPLAY_DIR)/rsspeak.c $(COMMON_DIR)/hl_fmt.h | dirs
	$(CC) $(CFLAGS) -Werror -shared -Wl,-z,now -o $@ $<

ALL_TARGETS += $(BINDIR)/heaplab-replay $(REPLAY_TESTLIBS) $(LIBDIR)/libheaplab-rsspeak.so

.PHONY: replay-test
replay-test: $(BINDIR)/heaplab-replay $(REPLAY_TESTLIBS) $(BINDIR)/hltrace-script $(LIBDIR)/libheaplab-record.so $(ALLOC_LIBS)
	$(REPLAY_DIR)/tests/run.sh $(BINDIR) $(LIBDIR) $(BUILD)/replay-test

TEST_TARGETS += replay-test

# The threaded lean loop gives every op kind a tail of its own; gcc's
# cross-jumping would merge them back into shared tails, a jump each.
$(REPLAY_OBJ)/threads.o: REPLAY_CFLAGS += -fno-crossjumping
