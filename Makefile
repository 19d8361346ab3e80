# heaplab: the two commands the README promises, and the build behind them.
#
#   make demo   set up, build, then record the bundled workloads and report on them
#   make test   set up, build, then run every test (this is what .ci/run runs)
#   make install PREFIX=DIR   a relocatable tree: DIR/bin/heaplab finds its files
#                             relative to itself (scripts/install.sh)
#   make install-native PREFIX=DIR   the same without bin/ (beside `cargo install
#                             --path crates/heaplab --root DIR`)
#   make dist   the release archive out/dist/heaplab-VERSION-ARCH-linux.tar.gz
#
# Both start from a fresh Debian 12 machine: scripts/setup.sh installs the
# Debian packages that are missing, then everything is built in place.

.PHONY: all setup build native rust demo test lint install install-native dist clean

PREFIX ?= /usr/local

all: build

setup:
	scripts/setup.sh

build: setup native rust

native:
	$(MAKE) -C native

rust:
	cargo build --release --workspace --quiet

demo: build
	target/release/heaplab demo

test: build
	scripts/test.sh

# formatting, clippy with the workspace's lints; scripts/test.sh runs it too
lint:
	cargo fmt --all --check
	cargo clippy --release --workspace --all-targets --quiet -- -D warnings

install: build
	scripts/install.sh "$(DESTDIR)$(PREFIX)"

install-native: setup native
	scripts/install.sh "$(DESTDIR)$(PREFIX)" --native-only

dist: build
	scripts/dist.sh

clean:
	$(MAKE) -C native clean
	cargo clean
