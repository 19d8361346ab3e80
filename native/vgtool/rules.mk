# native/vgtool: heaplab's Valgrind tool, built out of tree from Debian's
# valgrind kit (the pub_tool_*.h headers and libcoregrind/libvex archives).
#
#   build/lib/valgrind/                     the VALGRIND_LIB folder heaplab runs valgrind with:
#     heaplab-amd64-linux                   the tool, record mode (--tool=heaplab)
#     heaplab-measure-amd64-linux           the tool, measure mode (--tool=heaplab-measure)
#     heaplab-count-amd64-linux             the counting tool (--tool=heaplab-count, hl_count.c)
#     vgpreload_heaplab-amd64-linux.so      its malloc replacement (record mode only)
#     vgpreload_core-amd64-linux.so         the system's, linked in
#   build/bin/vgtool-test-*                 tiny C programs with known heap loads and stores
#
#   tests: crates/heaplab-refs/tests/vgtool.rs (cargo test), on the programs above
#
# The link follows valgrind.pc and Valgrind's own Makefile.tool.am: static,
# no default libraries, no start files, text segment at valt_load_address.

VG_DIR     := $(NATIVE)/vgtool
VG_KIT     := /usr/lib/x86_64-linux-gnu/valgrind
VG_INC     := /usr/include/valgrind
VG_LIBEXEC := /usr/libexec/valgrind
VG_OUT     := $(LIBDIR)/valgrind
VG_OBJ     := $(OBJDIR)/vgtool
VG_LOAD    := $(shell pkg-config --variable=valt_load_address valgrind 2>/dev/null || echo 0x58000000)

VG_CFLAGS := -std=gnu11 -O2 -g -Wall -Wno-unused-parameter -Wno-unused-function -fno-strict-aliasing \
             -fno-builtin -fno-stack-protector -fomit-frame-pointer -fno-pie -fno-pic \
             -I$(VG_INC) -DVGA_amd64=1 -DVGO_linux=1 -DVGP_amd64_linux=1 -DVGPV_amd64_linux_vanilla=1
VG_LDFLAGS := -static -nodefaultlibs -nostartfiles -u __start -Wl,--build-id=none -no-pie \
              -Wl,-Ttext-segment=$(VG_LOAD)
VG_LIBS    := -L$(VG_KIT) -lcoregrind-amd64-linux -lvex-amd64-linux -lgcc

VG_TOOLS := $(VG_OUT)/heaplab-amd64-linux $(VG_OUT)/heaplab-measure-amd64-linux \
            $(VG_OUT)/heaplab-count-amd64-linux
VG_FILES := $(VG_TOOLS) $(VG_OUT)/vgpreload_heaplab-amd64-linux.so $(VG_OUT)/vgpreload_core-amd64-linux.so

# Without the kit (no valgrind package) the tool is left out and its tests skip.
ifneq ($(wildcard $(VG_KIT)/libcoregrind-amd64-linux.a),)
ifeq ($(shell uname -m),x86_64)

$(VG_OBJ)/record.o: $(VG_DIR)/hl_tool.c $(VG_DIR)/heaplab_vg.h | dirs
	@mkdir -p $(VG_OBJ)
	$(CC) $(VG_CFLAGS) -DHL_MEASURE=0 -c $< -o $@

$(VG_OBJ)/measure.o: $(VG_DIR)/hl_tool.c $(VG_DIR)/heaplab_vg.h | dirs
	@mkdir -p $(VG_OBJ)
	$(CC) $(VG_CFLAGS) -DHL_MEASURE=1 -c $< -o $@

$(VG_OBJ)/count.o: $(VG_DIR)/hl_count.c $(VG_DIR)/heaplab_vg.h | dirs
	@mkdir -p $(VG_OBJ)
	$(CC) $(VG_CFLAGS) -c $< -o $@

$(VG_OUT)/heaplab-count-amd64-linux: $(VG_OBJ)/count.o
	@mkdir -p $(VG_OUT)
	$(CC) -o $@ $< $(VG_LDFLAGS) $(VG_LIBS)

$(VG_OUT)/heaplab-amd64-linux: $(VG_OBJ)/record.o
	@mkdir -p $(VG_OUT)
	$(CC) -o $@ $< $(VG_LDFLAGS) $(VG_LIBS)

$(VG_OUT)/heaplab-measure-amd64-linux: $(VG_OBJ)/measure.o
	@mkdir -p $(VG_OUT)
	$(CC) -o $@ $< $(VG_LDFLAGS) $(VG_LIBS)

# Valgrind's vg_replace_malloc.c, as the kit ships it, is the whole preload.
$(VG_OUT)/vgpreload_heaplab-amd64-linux.so: $(VG_KIT)/libreplacemalloc_toolpreload-amd64-linux.a
	@mkdir -p $(VG_OUT)
	$(CC) -shared -nodefaultlibs -Wl,-z,interpose,-z,initfirst -o $@ \
	    -Wl,--whole-archive $< -Wl,--no-whole-archive

$(VG_OUT)/vgpreload_core-amd64-linux.so: $(VG_LIBEXEC)/vgpreload_core-amd64-linux.so
	@mkdir -p $(VG_OUT)
	ln -sf $< $@

VG_TESTS := $(addprefix $(BINDIR)/vgtool-test-,counts reuse clock)
$(BINDIR)/vgtool-test-%: $(VG_DIR)/tests/%.c | dirs
	$(CC) -O1 -g -fno-builtin -o $@ $<

# The tests themselves are Rust (crates/heaplab-refs/tests/vgtool.rs), which
# reads the traces these programs leave: cargo test runs them.
ALL_TARGETS += $(VG_FILES) $(VG_TESTS)

endif
endif
