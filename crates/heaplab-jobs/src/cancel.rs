//! Interruption: SIGINT or SIGTERM sets a flag that the runner reads before
//! each job and that long waits poll, so an interrupted study stops
//! launching work, ends what runs (child processes included) and keeps every
//! outcome it finished.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Catches SIGINT and SIGTERM from now on (a second one still kills: the
/// handler is reset to the default after the first).
pub fn install() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe;
    // sigaction is given a zeroed struct with the handler and SA_RESETHAND.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESETHAND;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

/// Whether an interruption was asked for.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Asks for one (tests, and a caller that gives up).
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}
