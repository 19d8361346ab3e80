# heaplab: the two commands the README promises, and the build behind them.
#
#   make demo   set up, build, then record the bundled workloads and report on them
#   make test   set up, build, then run every test (this is what .ci/run runs)
#
# Both start from a fresh Debian 12 machine: scripts/setup.sh installs the
# Debian packages that are missing, then everything is built in place.

.PHONY: all setup build native rust demo test clean

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

clean:
	$(MAKE) -C native clean
	cargo clean
