# native/common: the trace format in C and the programs around it.
#
#   build/obj/common/hltrace_{core,writer,reader}.o   the format: core (names, CRC-32C,
#                                varints) with the writer (runs inside malloc hooks) and the
#                                reader (replayer, dump, the agent's fork child); HLTRACE_OBJ
#                                names all three, HLTRACE_WRITER_OBJ the first two
#   build/bin/hltrace-dump       prints a trace as text (the test vectors' dump form)
#   build/bin/hltrace-script     test tool: builds a trace from a vector script with the C writer
#   build/bin/hltrace-selftest   test tool: round trips, every truncation, every bit flip
#   build/bin/hl-fmt-test        test tool: hl_fmt.h (numbers to text, no malloc) against snprintf
#   build/bin/hltrace-bench      benchmark: the reader's ns per event and a digest of its output
#   build/obj/common/hl_unwind.o the cached stack walker (hl_unwind.h), libunwind for odd
#                                frames: linked into the agent and the segregated allocators
#   build/bin/unwind-oracle*     test tools: hl_unwind against libunwind (C, C++, no fallback)
#   build/bin/unwind-bench       benchmark: ns (or, under callgrind, instructions) per walk
#   build/lib/libheaplab-unwind-check.so  test tool: the same comparison inside real programs

COMMON_DIR  := $(NATIVE)/common
HLTRACE_WRITER_OBJ := $(OBJDIR)/common/hltrace_core.o $(OBJDIR)/common/hltrace_writer.o
HLTRACE_OBJ := $(HLTRACE_WRITER_OBJ) $(OBJDIR)/common/hltrace_reader.o
HLTRACE_LIBS := -lzstd
HLTRACE_HDRS := $(COMMON_DIR)/hltrace.h $(COMMON_DIR)/hltrace_int.h $(COMMON_DIR)/hltrace_enc.h

# -fno-semantic-interposition: the library's own calls to its exported
# helpers may be inlined even though the object is position-independent.
$(OBJDIR)/common/hltrace_%.o: $(COMMON_DIR)/hltrace_%.c $(HLTRACE_HDRS) | dirs
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Werror -fno-semantic-interposition -c $< -o $@

$(BINDIR)/hltrace-dump: $(COMMON_DIR)/hltrace_dump.c $(HLTRACE_OBJ) | dirs
	$(CC) $(CFLAGS) $^ -o $@ $(HLTRACE_LIBS)

$(BINDIR)/hltrace-script: $(COMMON_DIR)/tests/hltrace_script.c $(HLTRACE_OBJ) | dirs
	$(CC) $(CFLAGS) $^ -o $@ $(HLTRACE_LIBS)

$(BINDIR)/hltrace-selftest: $(COMMON_DIR)/tests/hltrace_selftest.c $(HLTRACE_OBJ) | dirs
	$(CC) $(CFLAGS) $^ -o $@ $(HLTRACE_LIBS)

$(BINDIR)/hltrace-bench: $(COMMON_DIR)/tests/hltrace_bench.c $(HLTRACE_OBJ) | dirs
	$(CC) $(CFLAGS) -Werror $^ -o $@ $(HLTRACE_LIBS)

# hl_fmt.h (header only): the number formatter every room uses, against snprintf.
$(BINDIR)/hl-fmt-test: $(COMMON_DIR)/tests/hl_fmt_test.c $(COMMON_DIR)/hl_fmt.h | dirs
	$(CC) $(CFLAGS) -Werror -Wshadow -o $@ $<

ALL_TARGETS += $(BINDIR)/hltrace-dump $(BINDIR)/hltrace-script $(BINDIR)/hltrace-selftest \
               $(BINDIR)/hl-fmt-test $(BINDIR)/hltrace-bench

.PHONY: test-common
test-common: $(BINDIR)/hltrace-dump $(BINDIR)/hltrace-script $(BINDIR)/hltrace-selftest \
             $(BINDIR)/hl-fmt-test
	$(BINDIR)/hl-fmt-test
	$(BINDIR)/hltrace-selftest
	$(COMMON_DIR)/tests/vectors.sh $(BINDIR) $(NATIVE)/../testdata/vectors

TEST_TARGETS += test-common

# The stack walker. Its users link -lunwind: odd frames go to libunwind.
HL_UNWIND_OBJ := $(OBJDIR)/common/hl_unwind.o
HL_UNWIND_LIBS := -lunwind
UNWIND_TEST_CFLAGS := $(CFLAGS) -fomit-frame-pointer -Werror -Wshadow

$(HL_UNWIND_OBJ): $(COMMON_DIR)/hl_unwind.c $(COMMON_DIR)/hl_unwind.h | dirs
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Werror -Wshadow -fvisibility=hidden -DHL_UNWIND_LIBUNWIND -c $< -o $@

UNWIND_TEST_DEPS := $(COMMON_DIR)/tests/unwind_check.h $(COMMON_DIR)/hl_unwind.h

$(BINDIR)/unwind-oracle: $(COMMON_DIR)/tests/unwind_oracle.c $(HL_UNWIND_OBJ) $(UNWIND_TEST_DEPS) | dirs
	$(CC) $(UNWIND_TEST_CFLAGS) -DHL_UNWIND_LIBUNWIND -o $@ $< $(HL_UNWIND_OBJ) -lunwind -lpthread -ldl

# hl_unwind.c built without the fallback: its walks must be prefixes of libunwind's
$(BINDIR)/unwind-oracle-nolu: $(COMMON_DIR)/tests/unwind_oracle.c $(COMMON_DIR)/hl_unwind.c $(UNWIND_TEST_DEPS) | dirs
	$(CC) $(UNWIND_TEST_CFLAGS) -o $@ $< $(COMMON_DIR)/hl_unwind.c -lunwind -lpthread -ldl

$(BINDIR)/unwind-oracle-cxx: $(COMMON_DIR)/tests/unwind_oracle_cxx.cc $(HL_UNWIND_OBJ) $(UNWIND_TEST_DEPS) | dirs
	$(CXX) $(CXXFLAGS) -I$(COMMON_DIR) -fomit-frame-pointer -DHL_UNWIND_LIBUNWIND -o $@ $< $(HL_UNWIND_OBJ) \
	    -lunwind -lpthread -ldl

$(LIBDIR)/libheaplab-unwind-check.so: $(COMMON_DIR)/tests/unwind_preload.c $(HL_UNWIND_OBJ) $(UNWIND_TEST_DEPS) | dirs
	$(CC) $(CFLAGS) -Werror -fno-builtin-malloc -DHL_UNWIND_LIBUNWIND -shared -o $@ $< $(HL_UNWIND_OBJ) \
	    -lunwind -ldl

$(BINDIR)/unwind-bench: $(COMMON_DIR)/tests/unwind_bench.c $(HL_UNWIND_OBJ) $(COMMON_DIR)/hl_unwind.h | dirs
	$(CC) $(UNWIND_TEST_CFLAGS) -o $@ $< $(HL_UNWIND_OBJ) -lunwind -ldl

UNWIND_TESTS := $(BINDIR)/unwind-bench $(BINDIR)/unwind-oracle $(BINDIR)/unwind-oracle-nolu $(BINDIR)/unwind-oracle-cxx \
                $(LIBDIR)/libheaplab-unwind-check.so
ALL_TARGETS += $(UNWIND_TESTS)

.PHONY: test-unwind
test-unwind: $(UNWIND_TESTS) $(LIBDIR)/libheaplab-record.so $(BINDIR)/hltrace-dump
	$(COMMON_DIR)/tests/unwind.sh $(BINDIR) $(LIBDIR) $(BUILD)/unwind-test $(LIBDIR)/libheaplab-record.so

TEST_TARGETS += test-unwind
