# native/common: the trace format in C (hltrace.c: writer, reader, CRC-32C,
# varints) and the programs around it.
#
#   build/obj/common/hltrace.o   linked into every C room that reads or writes traces
#   build/bin/hltrace-dump       prints a trace as text (the test vectors' dump form)
#   build/bin/hltrace-script     test tool: builds a trace from a vector script with the C writer
#   build/bin/hltrace-selftest   test tool: round trips, every truncation, every bit flip

COMMON_DIR  := $(NATIVE)/common
HLTRACE_OBJ := $(OBJDIR)/common/hltrace.o
HLTRACE_LIBS := -lzstd

# -fno-semantic-interposition: the library's own calls to its exported
# helpers may be inlined even though the object is position-independent.
$(HLTRACE_OBJ): $(COMMON_DIR)/hltrace.c $(COMMON_DIR)/hltrace.h | dirs
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fno-semantic-interposition -c $< -o $@

$(BINDIR)/hltrace-dump: $(COMMON_DIR)/hltrace_dump.c $(HLTRACE_OBJ) | dirs
	$(CC) $(CFLAGS) $^ -o $@ $(HLTRACE_LIBS)

$(BINDIR)/hltrace-script: $(COMMON_DIR)/tests/hltrace_script.c $(HLTRACE_OBJ) | dirs
	$(CC) $(CFLAGS) $^ -o $@ $(HLTRACE_LIBS)

$(BINDIR)/hltrace-selftest: $(COMMON_DIR)/tests/hltrace_selftest.c $(HLTRACE_OBJ) | dirs
	$(CC) $(CFLAGS) $^ -o $@ $(HLTRACE_LIBS)

ALL_TARGETS += $(BINDIR)/hltrace-dump $(BINDIR)/hltrace-script $(BINDIR)/hltrace-selftest

.PHONY: test-common
test-common: $(BINDIR)/hltrace-dump $(BINDIR)/hltrace-script $(BINDIR)/hltrace-selftest
	$(BINDIR)/hltrace-selftest
	$(COMMON_DIR)/tests/vectors.sh $(BINDIR) $(NATIVE)/../testdata/vectors

TEST_TARGETS += test-common
