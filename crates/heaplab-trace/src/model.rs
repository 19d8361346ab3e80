//! The things a trace holds, as Rust values.

use serde::Serialize;

/// The header fields of a trace (its META block).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Meta {
    pub pid: u64,
    pub ppid: Option<u64>,
    /// The command line, one entry per argument, as raw bytes.
    #[serde(serialize_with = "ser_argv")]
    pub argv: Vec<Vec<u8>>,
    /// Nanoseconds since the Unix epoch when recording started.
    pub start_ns: u64,
    pub pointer_size: u64,
    /// 0 little-endian, 1 big-endian.
    pub endian: u64,
    /// Nanoseconds per unit of event time.
    pub time_unit_ns: u64,
    /// Maximum frames per stack; 0 when stacks were off.
    pub stack_depth: u64,
    /// The text fields of META are raw bytes too: a trace may hold any byte,
    /// and every form heaplab writes (trace, dump) keeps them exactly.
    #[serde(serialize_with = "ser_opt_bytes")]
    pub recorder: Option<Vec<u8>>,
    #[serde(serialize_with = "ser_opt_bytes")]
    pub executable: Option<Vec<u8>>,
    #[serde(serialize_with = "ser_opt_bytes")]
    pub options: Option<Vec<u8>>,
    pub parent_pid: Option<u64>,
    #[serde(serialize_with = "ser_opt_bytes")]
    pub clock: Option<Vec<u8>>,
}

fn ser_argv<S: serde::Serializer>(argv: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(argv.iter().map(|a| String::from_utf8_lossy(a)))
}

/// Bytes in JSON: as text, with U+FFFD for bytes that are not UTF-8 (JSON
/// strings hold text only; the trace and its dump keep the bytes).
fn ser_bytes<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(b))
}

fn ser_opt_bytes<S: serde::Serializer>(b: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    match b {
        Some(b) => ser_bytes(b, s),
        None => s.serialize_none(),
    }
}

impl Meta {
    /// The command line joined with spaces, for display (lossy: not UTF-8
    /// bytes become U+FFFD; escape it before it goes to a terminal).
    pub fn command_line(&self) -> String {
        self.argv.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>().join(" ")
    }

    /// A META text field for display (lossy, like [`Meta::command_line`]).
    pub fn text(field: &Option<Vec<u8>>) -> Option<String> {
        field.as_ref().map(|b| String::from_utf8_lossy(b).into_owned())
    }
}

/// One loaded module: call sites are stored relative to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Module {
    pub id: u32,
    /// Load bias: runtime address = offset + base.
    pub base: u64,
    pub size: u64,
    /// The path as the recorder saw it, byte for byte (not necessarily UTF-8).
    #[serde(serialize_with = "ser_bytes")]
    pub path: Vec<u8>,
    #[serde(serialize_with = "ser_hex")]
    pub build_id: Vec<u8>,
}

fn ser_hex<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex(b))
}

/// Lower-case hex of some bytes.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One frame of a call stack: a return address, as (module, offset).
/// Module 0 means "in no known module" and `offset` is then absolute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Frame {
    pub module: u32,
    pub offset: u64,
}

/// One thread of the recorded process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadInfo {
    pub index: u32,
    pub tid: u64,
    /// The thread's name, byte for byte.
    #[serde(serialize_with = "ser_bytes")]
    pub name: Vec<u8>,
    /// Version 2: the thread started after the first `steps` steps of this
    /// thread (its creator at `pthread_create`); None when not known.
    pub start: Option<Dep>,
}

/// A recorded cross-thread edge (version 2): "after the first `steps` steps
/// of thread `thread`". Steps count a thread's events, a realloc of a
/// non-NULL pointer and a realloc_free twice (its release, then itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Dep {
    pub thread: u32,
    pub steps: u64,
}

/// How a recording ended (its END block).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct End {
    pub reason: EndReason,
    pub status: u64,
    pub end_ns: u64,
    pub events: u64,
    pub objects: u64,
    pub unrecorded: u64,
    pub unknown_frees: u64,
    /// Version 2: events the agent could not record (it says so loudly).
    pub lost: u64,
    /// Version 2: nanoseconds the program's threads waited for the writer.
    pub waited_ns: u64,
    /// Version 2: threads still inside a hook when END was written.
    pub inflight: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    #[default]
    Exit,
    Exec,
    Signal,
    Closed,
    /// A reason code this version does not name.
    Other(u64),
}

impl EndReason {
    pub fn code(self) -> u64 {
        match self {
            EndReason::Exit => 1,
            EndReason::Exec => 2,
            EndReason::Signal => 3,
            EndReason::Closed => 4,
            EndReason::Other(c) => c,
        }
    }
    pub fn from_code(c: u64) -> Self {
        match c {
            1 => EndReason::Exit,
            2 => EndReason::Exec,
            3 => EndReason::Signal,
            4 => EndReason::Closed,
            c => EndReason::Other(c),
        }
    }
    pub fn name(self) -> String {
        match self {
            EndReason::Exit => "exit".into(),
            EndReason::Exec => "exec".into(),
            EndReason::Signal => "signal".into(),
            EndReason::Closed => "closed".into(),
            EndReason::Other(c) => c.to_string(),
        }
    }
}

/// The allocator entry point an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Malloc,
    Calloc,
    Realloc,
    Memalign,
    PosixMemalign,
    AlignedAlloc,
    Valloc,
    Pvalloc,
    Free,
    /// `realloc(p, 0)` that released `p` and returned NULL.
    ReallocFree,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::Malloc,
        Kind::Calloc,
        Kind::Realloc,
        Kind::Memalign,
        Kind::PosixMemalign,
        Kind::AlignedAlloc,
        Kind::Valloc,
        Kind::Pvalloc,
        Kind::Free,
        Kind::ReallocFree,
    ];

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(c: u8) -> Option<Kind> {
        Kind::ALL.get(c as usize).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Malloc => "malloc",
            Kind::Calloc => "calloc",
            Kind::Realloc => "realloc",
            Kind::Memalign => "memalign",
            Kind::PosixMemalign => "posix_memalign",
            Kind::AlignedAlloc => "aligned_alloc",
            Kind::Valloc => "valloc",
            Kind::Pvalloc => "pvalloc",
            Kind::Free => "free",
            Kind::ReallocFree => "realloc_free",
        }
    }

    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Carries a size column entry.
    pub fn has_size(self) -> bool {
        !self.is_release()
    }

    /// Carries an alignment column entry.
    pub fn has_align(self) -> bool {
        matches!(
            self,
            Kind::Memalign
                | Kind::PosixMemalign
                | Kind::AlignedAlloc
                | Kind::Valloc
                | Kind::Pvalloc
        )
    }

    /// Creates an object (unless it failed).
    pub fn creates(self) -> bool {
        !self.is_release()
    }

    /// Only releases an object.
    pub fn is_release(self) -> bool {
        matches!(self, Kind::Free | Kind::ReallocFree)
    }
}

/// One event, fully decoded: what a reader yields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Position in the trace, from 0.
    pub index: u64,
    pub kind: Kind,
    /// Thread index (see [`ThreadInfo`]).
    pub thread: u32,
    /// Absolute time in time units (see [`Meta::time_unit_ns`]).
    pub time: u64,
    /// Requested size; for a release, the size of the object released.
    pub size: u64,
    /// Requested alignment for the memalign family, else 0.
    pub align: u64,
    /// The object this event creates (None for a release or a failure).
    pub id: Option<u64>,
    /// The object this event releases or reallocates.
    pub old: Option<u64>,
    /// Size of `old`, 0 when there is none.
    pub old_size: u64,
    /// Stack id, 0 when none was recorded.
    pub stack: u32,
    pub failed: bool,
    pub inherited: bool,
    /// Position of the event in its thread's own stream, from 0 (0 for
    /// inherited objects, which belong to no stream).
    pub thread_seq: u64,
    /// With `old`: the thread whose event created it, and that event's
    /// `thread_seq` (a per-object dependency for a threaded replay).
    pub old_thread: u32,
    pub old_seq: u64,
    /// Version 2: the cross-thread edges the recorder wrote for this event
    /// (its release step's first); the merge already honours them.
    pub after: [Option<Dep>; 2],
}

impl Default for Event {
    /// A malloc of 0 bytes with nothing set: for building events in tests
    /// with `..Event::default()`.
    fn default() -> Self {
        Event {
            index: 0,
            kind: Kind::Malloc,
            thread: 0,
            time: 0,
            size: 0,
            align: 0,
            id: None,
            old: None,
            old_size: 0,
            stack: 0,
            failed: false,
            inherited: false,
            thread_seq: 0,
            old_thread: 0,
            old_seq: 0,
            after: [None, None],
        }
    }
}

/// An event for a writer: the writer assigns ids and indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub kind: Kind,
    pub thread: u32,
    /// Absolute time in units; a value below the previous event's is raised to it.
    pub time: u64,
    pub size: u64,
    pub align: u64,
    /// The object released or reallocated; None for `realloc(NULL, n)` and allocations.
    pub old: Option<u64>,
    pub stack: u32,
    pub failed: bool,
    pub inherited: bool,
}

impl NewEvent {
    /// A plain allocation of `kind` with everything else zero.
    pub fn alloc(kind: Kind, size: u64) -> Self {
        NewEvent {
            kind,
            thread: 0,
            time: 0,
            size,
            align: 0,
            old: None,
            stack: 0,
            failed: false,
            inherited: false,
        }
    }
    /// A free of `id`.
    pub fn free(id: u64) -> Self {
        NewEvent { old: Some(id), ..NewEvent::alloc(Kind::Free, 0) }
    }
    /// A realloc of `id` (None: `realloc(NULL, size)`).
    pub fn realloc(old: Option<u64>, size: u64) -> Self {
        NewEvent { old, ..NewEvent::alloc(Kind::Realloc, size) }
    }
    pub fn at(mut self, thread: u32, time: u64) -> Self {
        self.thread = thread;
        self.time = time;
        self
    }
    pub fn with_stack(mut self, stack: u32) -> Self {
        self.stack = stack;
        self
    }
    pub fn with_align(mut self, align: u64) -> Self {
        self.align = align;
        self
    }
}
