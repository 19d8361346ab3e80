//! Fuzz target: heaplab_fuzz::refs (see fuzz/README.md).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| heaplab_fuzz::refs(data));
