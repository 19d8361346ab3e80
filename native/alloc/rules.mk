# native/alloc: one build/lib/libheaplab-NAME.so per line of registry.txt,
# and the test suite over all of them.  Adding an allocator needs no change
# here: see native/alloc/README.md.
#
#   make -C native alloc                      build every allocator and the test programs
#   make -C native alloc-test                 run every test on every allocator and glibc
#   make -C native alloc-test ALLOCATORS="firstfit bsd" ALLOC_TESTS="conform random"

ALLOC_DIR      := $(NATIVE)/alloc
ALLOC_OBJ      := $(OBJDIR)/alloc
ALLOC_REGISTRY := $(ALLOC_DIR)/registry.txt

# The names in registry.txt (first field of every line that is not a comment).
ALLOC_NAMES := $(shell awk -F'|' '/^[ \t]*[a-z0-9_]/ { gsub(/[ \t]/,"",$$1); print $$1 }' $(ALLOC_REGISTRY))
alloc_links  = $(shell awk -F'|' -v n='$(1)' '/^[ \t]*[a-z0-9_]/ { a=$$1; gsub(/[ \t]/,"",a); if (a==n) print $$2 }' $(ALLOC_REGISTRY))

ALLOC_CFLAGS  := $(CFLAGS) -I$(ALLOC_DIR) -fvisibility=hidden -Werror -Wshadow -Wstrict-prototypes \
                 -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc -fno-builtin-free \
                 -ftls-model=initial-exec
ALLOC_HEADERS := $(ALLOC_DIR)/hl_alloc.h $(ALLOC_DIR)/hl_internal.h $(ALLOC_DIR)/aotreap.h $(ALLOC_DIR)/btag.h \
                 $(NATIVE)/common/heaplab_site.h $(NATIVE)/common/hl_fmt.h
ALLOC_COMMON  := $(ALLOC_OBJ)/platform.o $(ALLOC_OBJ)/pad.o
ALLOC_LIBS    := $(foreach n,$(ALLOC_NAMES),$(LIBDIR)/libheaplab-$(n).so)
ALLOC_TESTBIN := $(BINDIR)/alloc-conform $(BINDIR)/alloc-random $(BINDIR)/alloc-threads \
                 $(BINDIR)/alloc-digest

$(ALLOC_OBJ)/%.o: $(ALLOC_DIR)/%.c $(ALLOC_HEADERS) | dirs
	@mkdir -p $(ALLOC_OBJ)
	$(CC) $(ALLOC_CFLAGS) -c $< -o $@

$(ALLOC_OBJ)/shim-%.o: $(ALLOC_DIR)/shim.c $(ALLOC_HEADERS) | dirs
	@mkdir -p $(ALLOC_OBJ)
	$(CC) $(ALLOC_CFLAGS) -DHL_ALLOC_SYM=hl_alloc_$* -c $< -o $@

define ALLOC_template
$(LIBDIR)/libheaplab-$(1).so: $(ALLOC_OBJ)/shim-$(1).o $(ALLOC_OBJ)/$(1).o $(foreach d,$(call alloc_links,$(1)),$(ALLOC_OBJ)/$(d).o) $(ALLOC_COMMON) $(ALLOC_REGISTRY)
	$(CC) -shared -Wl,-z,now -Wl,--no-undefined -o $$@ $$(filter %.o,$$^)
endef
$(foreach n,$(ALLOC_NAMES),$(eval $(call ALLOC_template,$(n))))

$(BINDIR)/alloc-%: $(ALLOC_DIR)/tests/%.c $(ALLOC_DIR)/tests/testlib.h $(ALLOC_DIR)/hl_alloc.h $(NATIVE)/common/heaplab_site.h | dirs
	$(CC) $(CFLAGS) -I$(ALLOC_DIR) -O1 -fno-builtin -Werror -Wno-use-after-free $(ALLOC_TEST_LDFLAGS) -o $@ $< -ldl -lpthread

# The digest test defines mmap and munmap for the preloaded allocator to call.
$(BINDIR)/alloc-digest: ALLOC_TEST_LDFLAGS := -rdynamic

.PHONY: alloc alloc-test
alloc: $(ALLOC_LIBS) $(ALLOC_TESTBIN)

ALLOCATORS  ?= $(ALLOC_NAMES)
ALLOC_TESTS ?= info conform random threads digest programs
alloc-test: alloc
	@ALLOC_NAMES="$(ALLOC_NAMES)" $(ALLOC_DIR)/tests/run.sh --lib $(LIBDIR) --bin $(BINDIR) \
	    --work $(BUILD)/alloc-test --registry $(ALLOC_REGISTRY) \
	    --allocators "$(ALLOCATORS)" --tests "$(ALLOC_TESTS)"

ALL_TARGETS  += alloc
TEST_TARGETS += alloc-test
