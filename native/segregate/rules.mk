# native/segregate: Seidl and Zorn's segmented allocator (paper 001 §4.2) and
# its run-time predictor lookup.  `heaplab segregate` emits a predictor table
# (one C file) and links it with these sources into libNAME.so, as the
# synthesizer does (crates/heaplab-segregate/src/emit.rs); the libraries
# built here are DEFAULT and the test allocators:
#
#   build/lib/libheaplab-segregated.so           DEFAULT: one segment, no prediction
#   build/lib/libheaplab-segregated_random.so    RANDOM: four segments, a random one per object
#   build/lib/libheaplab-segregated_stack.so     STACK-3 with an empty table that walks every
#                                                time: four segments, the whole run-time
#                                                identification (walk, keys) on every allocation
#   build/lib/libheaplab-segregated_sp.so        SP with an empty table, on SP's shim
#   build/lib/libheaplab-segtest-*.so            tables for the tests (tests/table_*.c)
#   build/bin/seg-test, seg-workload             the C tests; a small program whose objects fall
#                                                into the classes by construction (for the Rust
#                                                end-to-end tests of heaplab segregate)
#
#   make -C native segregate-test                the layout, site-hint and run-time tests,
#                                                then the zoo's suite on the three allocators

SEG_DIR := $(NATIVE)/segregate
SEG_OBJ := $(OBJDIR)/segregate
SEG_HEADERS := $(SEG_DIR)/seg.h $(SEG_DIR)/seg_front.h $(SEG_DIR)/seg_heap.h $(SEG_DIR)/seg_ident.h \
               $(SEG_DIR)/seg_thread.h $(NATIVE)/common/heaplab_site.h \
               $(NATIVE)/alloc/btag.h $(NATIVE)/common/hl_fmt.h \
               $(NATIVE)/common/hl_unwind.h $(NATIVE)/alloc/fastcore.h \
               $(NATIVE)/alloc/hl_alloc.h $(NATIVE)/alloc/hl_internal.h
# -DSF_COUNT=1 for every object here, the fast core's own copy of fastcore.c
# ($(SEG_OBJ)/fastcore.o, not the zoo's or a synthesized allocator's) too: the
# fast cores count every call they serve, so that each segment's objects in
# the report and heaplab_alloc_stats' totals are exact (seg_front.h checks it).
SEG_CFLAGS := $(CFLAGS) -DSF_COUNT=1 -I$(SEG_DIR) -I$(NATIVE)/alloc -fvisibility=hidden -Werror -Wshadow \
              -Wstrict-prototypes -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc \
              -fno-builtin-free -ftls-model=initial-exec $(shell pkg-config --cflags libunwind 2>/dev/null)
# The shim's lock-free front end hook (HL_FRONT_H) identifies the call site
# and serves the per-thread caches before the lock; its entry points keep a
# frame pointer, which gives the identification the program's frame (SP's
# shim aside: SP reads only the caller's stack pointer).
SEG_FRONT := -DHL_FRONT_H='"seg_front.h"'

$(SEG_OBJ)/shim.o: $(NATIVE)/alloc/shim.c $(SEG_HEADERS) | dirs
	@mkdir -p $(SEG_OBJ)
	$(CC) $(SEG_CFLAGS) -fno-omit-frame-pointer -DHL_ALLOC_SYM=hl_alloc_segregated $(SEG_FRONT) -c $< -o $@

# DEFAULT's shim: one segment, no identification
$(SEG_OBJ)/shim_one.o: $(NATIVE)/alloc/shim.c $(SEG_HEADERS) | dirs
	@mkdir -p $(SEG_OBJ)
	$(CC) $(SEG_CFLAGS) -fno-omit-frame-pointer -DHL_SEG_ONE -DHL_ALLOC_SYM=hl_alloc_segregated $(SEG_FRONT) -c $< -o $@

# The shims of one predictor, the identification's fast path inline
# (seg_ident.h): PATH and STACK; SP (no frame pointer: SP reads only the
# caller's stack pointer, the entry point's canonical frame address)
$(SEG_OBJ)/shim_stack.o: $(NATIVE)/alloc/shim.c $(SEG_HEADERS) | dirs
	@mkdir -p $(SEG_OBJ)
	$(CC) $(SEG_CFLAGS) -fno-omit-frame-pointer -DHL_SEG_INLINE_STACK -DHL_ALLOC_SYM=hl_alloc_segregated $(SEG_FRONT) -c $< -o $@
$(SEG_OBJ)/shim_sp.o: $(NATIVE)/alloc/shim.c $(SEG_HEADERS) | dirs
	@mkdir -p $(SEG_OBJ)
	$(CC) $(SEG_CFLAGS) -fomit-frame-pointer -DHL_SEG_INLINE_SP -DHL_ALLOC_SYM=hl_alloc_segregated $(SEG_FRONT) -c $< -o $@

# the fast core, one instance per segment (native/alloc/fastcore.c)
$(SEG_OBJ)/fastcore.o: $(NATIVE)/alloc/fastcore.c $(SEG_HEADERS) | dirs
	@mkdir -p $(SEG_OBJ)
	$(CC) $(SEG_CFLAGS) -c $< -o $@

$(SEG_OBJ)/%.o: $(SEG_DIR)/%.c $(SEG_HEADERS) | dirs
	@mkdir -p $(SEG_OBJ)
	$(CC) $(SEG_CFLAGS) -c $< -o $@

$(SEG_OBJ)/table_%.o: $(SEG_DIR)/tests/table_%.c $(SEG_HEADERS) | dirs
	@mkdir -p $(SEG_OBJ)
	$(CC) $(SEG_CFLAGS) -c $< -o $@

SEG_COMMON := $(SEG_OBJ)/segregated.o $(SEG_OBJ)/seg_bestfit.o \
            $(SEG_OBJ)/seg_front.o $(SEG_OBJ)/seg_ident.o $(SEG_OBJ)/seg_os.o \
            $(SEG_OBJ)/fastcore.o \
            $(OBJDIR)/alloc/platform.o $(OBJDIR)/alloc/pad.o $(HL_UNWIND_OBJ)
SEG_CORE := $(SEG_OBJ)/shim.o $(SEG_COMMON)
SEG_LINK  = $(CC) -shared -Wl,-z,now -Wl,--no-undefined -o $@ $(filter %.o,$^) -lunwind -ldl

$(LIBDIR)/libheaplab-segregated.so: $(SEG_OBJ)/shim_one.o $(SEG_COMMON) $(SEG_OBJ)/default_table.o
	$(SEG_LINK)
$(LIBDIR)/libheaplab-segregated_%.so: $(SEG_CORE) $(SEG_OBJ)/table_%.o
	$(SEG_LINK)
$(LIBDIR)/libheaplab-segtest-%.so: $(SEG_CORE) $(SEG_OBJ)/table_%.o
	$(SEG_LINK)
# STACK's run-time tests with the identification inline, as heaplab segregate
# builds STACK and PATH (the walking table: the zoo's suite on it)
$(LIBDIR)/libheaplab-segregated_stack.so: $(SEG_OBJ)/shim_stack.o $(SEG_COMMON) $(SEG_OBJ)/table_stack.o
	$(SEG_LINK)
$(LIBDIR)/libheaplab-segtest-env.so: $(SEG_OBJ)/shim_stack.o $(SEG_COMMON) $(SEG_OBJ)/table_env.o
	$(SEG_LINK)
# SP's shim (its lookup inline, no frame pointer), as heaplab segregate builds SP
$(LIBDIR)/libheaplab-segregated_sp.so: $(SEG_OBJ)/shim_sp.o $(SEG_COMMON) $(SEG_OBJ)/table_sp.o
	$(SEG_LINK)

SEG_LIBS := $(LIBDIR)/libheaplab-segregated.so $(LIBDIR)/libheaplab-segregated_random.so \
            $(LIBDIR)/libheaplab-segregated_stack.so $(LIBDIR)/libheaplab-segregated_sp.so \
            $(LIBDIR)/libheaplab-segtest-hint.so \
            $(LIBDIR)/libheaplab-segtest-path.so $(LIBDIR)/libheaplab-segtest-size.so \
            $(LIBDIR)/libheaplab-segtest-env.so
SEG_TESTBIN := $(BINDIR)/seg-test $(BINDIR)/seg-workload

$(BINDIR)/seg-test: $(SEG_DIR)/tests/seg_test.c $(SEG_DIR)/seg.h $(NATIVE)/common/heaplab_site.h | dirs
	$(CC) $(CFLAGS) -I$(SEG_DIR) -O1 -fno-builtin -fno-omit-frame-pointer -Werror -rdynamic -o $@ $< -ldl

$(BINDIR)/seg-workload: $(SEG_DIR)/tests/seg_workload.c | dirs
	$(CC) $(CFLAGS) -O1 -g -fno-builtin -fno-omit-frame-pointer -Werror -o $@ $<

.SECONDARY: $(patsubst $(SEG_DIR)/tests/%.c,$(SEG_OBJ)/%.o,$(wildcard $(SEG_DIR)/tests/table_*.c))
.PHONY: segregate segregate-test
segregate: $(SEG_LIBS) $(SEG_TESTBIN) $(SEG_OBJ)/shim_sp.o

segregate-test: segregate alloc
	@$(SEG_DIR)/tests/run.sh $(LIBDIR) $(BINDIR) $(BUILD)/segregate-test

ALL_TARGETS  += segregate
TEST_TARGETS += segregate-test
