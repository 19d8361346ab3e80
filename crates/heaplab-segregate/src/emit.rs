//! The emitted allocator: a predictor table as one C file, compiled with the
//! segmented allocator (`native/segregate`) and the zoo's shim and platform
//! layer into `DIR/libNAME.so`, as the synthesizer builds its allocators
//! (`heaplab-synth`, `build.rs`).
//!
//! | object | from | how |
//! |---|---|---|
//! | `NAME_table.o` | `DIR/NAME_table.c` (written here) | the tree's nodes, sorted, and PATH's points |
//! | `segregated.o` | `native/segregate/segregated.c` | the segments, the class of a new object, the report |
//! | `seg_bestfit.o` | `native/segregate/seg_bestfit.c` | each segment's best-fit heap (large blocks, the memalign family) |
//! | `fastcore.o` | `native/alloc/fastcore.c` | each segment's fast core (one `sf_core_t` per segment): every size to 32 KiB |
//! | `seg_front.o` | `native/segregate/seg_front.c` | the front end's slow paths, thread start and exit, the counters |
//! | `seg_ident.o` | `native/segregate/seg_ident.c` | the calling context's class: the context cache, the walk, the tree |
//! | `seg_os.o` | `native/segregate/seg_os.c` | the walk, the module map, the report at exit |
//! | `hl_unwind.o` | `native/common/hl_unwind.c` | `-DHL_UNWIND_LIBUNWIND`: the cached stack walker |
//! | `shim*.o` | `native/alloc/shim.c` | `-DHL_ALLOC_SYM=hl_alloc_segregated -DHL_FRONT_H="seg_front.h" -fno-omit-frame-pointer` (SP's: `-fomit-frame-pointer`): the malloc API, the identification and the fast cores' hot paths before the lock; one per [`Front`]: `shim_one.o` (DEFAULT: `-DHL_SEG_ONE`, no identification), `shim_stack.o` (PATH, STACK: `-DHL_SEG_INLINE_STACK`), `shim_sp.o` (SP: `-DHL_SEG_INLINE_SP`), `shim.o` (the others) |
//! | `platform.o`, `pad.o` | `native/alloc/` | as in every zoo allocator |
//!
//! Every object is compiled with `-DSF_COUNT=1` (fastcore.h's statistics
//! build; `native/segregate/seg_front.h` refuses to compile without it), so
//! that each segment's objects and the totals are exact.
//!
//! The objects shared by every table are compiled once per output directory
//! (`DIR/obj/`) and reused while they are newer than their sources.

use crate::classes::Class;
use crate::predictors::{Kind, Predictor};
use anyhow::{Context, Result};
use heaplab_plumb::cbuild::{CBuild, Unit};
use heaplab_plumb::Layout;
use heaplab_trace::escape;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The C file of a predictor table (`hl_seg_table_t`, version 2: a tree of
/// call-site prefixes, `native/segregate/seg.h`).
/// `about` (which may name trace files, so hold any byte) goes into a
/// comment and a string, both escaped by `heaplab_trace::escape`.
pub fn table_c(p: &Predictor, nsegments: u32, depth: u32, about: impl AsRef<[u8]>) -> String {
    let about = about.as_ref();
    let nodes = p.nodes();
    let points: Vec<(u64, Class)> = p.tree.as_ref().map(|t| t.points.clone()).unwrap_or_default();
    let mut s = String::new();
    let _ = writeln!(s, "/*");
    let _ = writeln!(
        s,
        " * The {} predictor table for native/segregate (seg.h), emitted",
        p.kind.name()
    );
    let _ = writeln!(
        s,
        " * by `heaplab segregate` (crates/heaplab-segregate). {} keys kept in training:",
        p.table.len()
    );
    let n = p.entries_per_class();
    let _ = writeln!(
        s,
        " * {} SL, {} HR, {} not-HR; as a tree of call-site prefixes: {} nodes{}.",
        n[Class::Sl.index()],
        n[Class::Hr.index()],
        n[Class::NotHr.index()],
        nodes.len(),
        match &p.tree {
            Some(t) => format!(
                ", {} return addresses decide alone, {} walk further",
                t.levels.first().map_or(0, |l| l.leaves),
                t.root_walks()
            ),
            None => String::new(),
        }
    );
    for line in about.split(|&b| b == b'\n') {
        let _ = writeln!(s, " * {}", escape::c_comment(line));
    }
    let _ = writeln!(s, " */");
    let _ = writeln!(s, "#include \"seg.h\"\n");
    let array = |s: &mut String, ty: &str, name: &str, items: Vec<String>, per_line: usize| {
        let _ = writeln!(s, "static const {ty} {name}[{}] = {{", items.len().max(1));
        for chunk in items.chunks(per_line) {
            let _ = writeln!(s, "    {},", chunk.join(", "));
        }
        if items.is_empty() {
            let _ = writeln!(s, "    0,");
        }
        let _ = writeln!(s, "}};\n");
    };
    array(
        &mut s,
        "uint64_t",
        "keys",
        nodes.iter().map(|(k, _)| format!("0x{k:016x}ull")).collect(),
        4,
    );
    let _ =
        writeln!(s, "/* 0 other, 1 SL, 2 HR, 3 not-HR; 0x80 | n: walk (n more frames at most) */");
    array(
        &mut s,
        "uint8_t",
        "values",
        nodes.iter().map(|(_, v)| format!("0x{v:02x}")).collect(),
        16,
    );
    array(
        &mut s,
        "uint64_t",
        "points",
        points.iter().map(|(k, _)| format!("0x{k:016x}ull")).collect(),
        4,
    );
    array(
        &mut s,
        "uint8_t",
        "point_classes",
        points.iter().map(|(_, c)| c.index().to_string()).collect(),
        24,
    );
    let seed = match p.kind {
        Kind::Random { seed } => seed,
        _ => 0,
    };
    let about_c = escape::c_string(about);
    let root_walks = p.tree.as_ref().map_or(0, |t| t.root_walks());
    let _ = writeln!(
        s,
        "const hl_seg_table_t hl_seg_table = {{\n    .version = HL_SEG_TABLE_VERSION,\n    .predictor = {},\n    .depth = {depth},\n    .nsegments = {nsegments},\n    .seed = {seed}ull,\n    .n = {},\n    .keys = keys,\n    .values = values,\n    .npoints = {},\n    .points = points,\n    .point_classes = point_classes,\n    .root_walks = {root_walks},\n    .name = \"{}\",\n    .about = {about_c},\n}};",
        p.kind.code(),
        nodes.len(),
        points.len(),
        p.kind.name()
    );
    s
}

/// What a build made.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Built {
    pub name: String,
    pub table: PathBuf,
    pub so: PathBuf,
    pub commands: Vec<String>,
    pub seconds: f64,
}

/// Compiles tables against the tree's `native/` with the zoo's flags
/// (heaplab-plumb's C builder).
pub struct Builder {
    cb: CBuild,
    obj: PathBuf,
    core: Option<Vec<PathBuf>>,
    pub commands: Vec<String>,
}

fn newer(obj: &Path, srcs: &[PathBuf]) -> bool {
    let Ok(o) = obj.metadata().and_then(|m| m.modified()) else {
        return false;
    };
    srcs.iter().all(|s| s.metadata().and_then(|m| m.modified()).is_ok_and(|t| t <= o))
}

impl Builder {
    /// `layout`: the tree whose `native/` is built; objects go to `out/obj`.
    pub fn new(layout: &Layout, out: &Path) -> Result<Builder> {
        let mut cb = CBuild::zoo(layout)?;
        cb.require(
            &[
                "segregate/segregated.c",
                "segregate/seg_bestfit.c",
                "segregate/seg_front.c",
                "segregate/seg_ident.c",
                "segregate/seg_os.c",
                "segregate/seg.h",
                "alloc/fastcore.c",
                "alloc/fastcore.h",
                "common/hl_unwind.c",
                "alloc/shim.c",
                "alloc/platform.c",
                "alloc/pad.c",
            ],
            "heaplab segregate",
        )?;
        cb.include(layout.native.join("segregate"));
        let obj = out.join("obj");
        std::fs::create_dir_all(&obj).with_context(|| format!("creating {}", obj.display()))?;
        Ok(Builder { cb, obj, core: None, commands: Vec::new() })
    }

    fn take_commands(&mut self) {
        self.commands.append(&mut self.cb.commands);
    }

    fn core(&mut self) -> Result<Vec<PathBuf>> {
        if let Some(c) = &self.core {
            return Ok(c.clone());
        }
        let n = self.cb.native.clone();
        let headers: Vec<PathBuf> = [
            "segregate/seg.h",
            "segregate/seg_front.h",
            "segregate/seg_heap.h",
            "segregate/seg_thread.h",
            "segregate/seg_ident.h",
            "common/heaplab_site.h",
            "common/hl_unwind.h",
            "alloc/hl_alloc.h",
            "alloc/hl_internal.h",
            "alloc/btag.h",
            "alloc/fastcore.h",
            "common/hl_fmt.h",
        ]
        .iter()
        .map(|h| n.join(h))
        .collect();
        // The shim's lock-free front end identifies the call site and serves
        // the caches before the lock; its entry points keep a frame pointer
        // (SP's aside: `Front::frame`).
        let front = "-DHL_FRONT_H=\"seg_front.h\"".to_string();
        let units: Vec<(PathBuf, &str, Vec<String>)> = vec![
            (n.join("segregate/segregated.c"), "segregated", vec![]),
            (n.join("segregate/seg_bestfit.c"), "seg_bestfit", vec![]),
            (n.join("segregate/seg_front.c"), "seg_front", vec![]),
            (n.join("alloc/fastcore.c"), "fastcore", vec![]),
            (n.join("segregate/seg_ident.c"), "seg_ident", vec![]),
            (n.join("segregate/seg_os.c"), "seg_os", vec![]),
            (n.join("common/hl_unwind.c"), "hl_unwind", vec!["-DHL_UNWIND_LIBUNWIND".into()]),
            (n.join("alloc/platform.c"), "platform", vec![]),
            (n.join("alloc/pad.c"), "pad", vec![]),
        ];
        // one shim per front end: its identification inline, or DEFAULT's none
        let units = units.into_iter().chain(Front::ALL.into_iter().map(|f| {
            let mut extra = vec!["-DHL_ALLOC_SYM=hl_alloc_segregated".to_string()];
            extra.extend(f.define().map(String::from));
            extra.extend([front.clone(), f.frame().into()]);
            (n.join("alloc/shim.c"), f.stem(), extra)
        }));
        let mut objs = Vec::new();
        let mut stale = Vec::new();
        for (src, stem, mut extra) in units {
            // every object, fastcore.c's too: the fast cores count every call
            // they serve, so that each segment's objects are exact (seg_front.h
            // refuses to compile without it)
            extra.insert(0, "-DSF_COUNT=1".into());
            let o = self.obj.join(format!("{stem}.o"));
            let mut deps = headers.clone();
            deps.push(src.clone());
            if !newer(&o, &deps) {
                stale.push(Unit { src, obj: o.clone(), extra });
            }
            objs.push(o);
        }
        let r = self.cb.compile(&stale, 1);
        self.take_commands();
        r?;
        self.core = Some(objs.clone());
        Ok(objs)
    }

    /// Writes `dir/NAME_table.c` and builds `dir/libNAME.so` with the shim
    /// for `front` (see [`Front`]).
    pub fn build(&mut self, name: &str, table_c: &str, dir: &Path, front: Front) -> Result<Built> {
        let t0 = Instant::now();
        let start = self.commands.len();
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let table = dir.join(format!("{name}_table.c"));
        heaplab_plumb::output::write(&table, table_c)?;
        let core = self.core()?;
        let o = self.obj.join(format!("{name}_table.o"));
        let r = self.cb.compile(
            &[Unit { src: table.clone(), obj: o.clone(), extra: vec!["-DSF_COUNT=1".into()] }],
            1,
        );
        self.take_commands();
        r?;
        let so = dir.join(format!("lib{name}.so"));
        let shim = front.stem();
        let mut objects: Vec<PathBuf> = core
            .into_iter()
            .filter(|o| {
                let stem = o.file_stem().and_then(|f| f.to_str()).unwrap_or("");
                !stem.starts_with("shim") || stem == shim
            })
            .collect();
        objects.push(o);
        let r = self.cb.link_shared(&so, &objects, &["-lunwind", "-ldl"]);
        self.take_commands();
        r?;
        Ok(Built {
            name: name.to_string(),
            table,
            so: so.canonicalize().unwrap_or(so),
            commands: self.commands[start..].to_vec(),
            seconds: t0.elapsed().as_secs_f64(),
        })
    }
}

/// The table's `depth` field: the frames of a context (STACK's k; PATH: as
/// many as the recording kept); 0 for the others.
pub fn table_depth(kind: Kind, recorded_depth: u64) -> u32 {
    match kind {
        Kind::Stack { .. } | Kind::StackSize { .. } | Kind::Path => {
            Predictor::tree_depth(kind, recorded_depth)
        }
        _ => 0,
    }
}

/// Which shim a library links: its front end (`native/segregate/seg_front.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// DEFAULT's: one segment, no identification (`-DHL_SEG_ONE`).
    One,
    /// The identification through the thread's function pointer (RANDOM,
    /// STACK+size, any table).
    Generic,
    /// PATH's and STACK's identification inline (`-DHL_SEG_INLINE_STACK`).
    Stack,
    /// SP's inline (`-DHL_SEG_INLINE_SP`).
    Sp,
}

impl Front {
    /// The front end a predictor's library is built with.
    pub fn of(kind: Kind) -> Front {
        match kind {
            Kind::Default => Front::One,
            Kind::Stack { .. } | Kind::Path => Front::Stack,
            Kind::Sp => Front::Sp,
            Kind::StackSize { .. } | Kind::Random { .. } => Front::Generic,
        }
    }
    const ALL: [Front; 4] = [Front::Generic, Front::One, Front::Stack, Front::Sp];
    /// The stem of its shim's object (`DIR/obj/STEM.o`).
    fn stem(self) -> &'static str {
        match self {
            Front::One => "shim_one",
            Front::Generic => "shim",
            Front::Stack => "shim_stack",
            Front::Sp => "shim_sp",
        }
    }
    /// Its entry points' frame: SP reads only the caller's stack pointer
    /// (the canonical frame address, seg_front.h's `HL_SEG_FP`), so its shim
    /// keeps no frame pointer and its malloc pushes nothing; the others read
    /// the program's frames from the entry point's frame pointer.
    fn frame(self) -> &'static str {
        match self {
            Front::Sp => "-fomit-frame-pointer",
            _ => "-fno-omit-frame-pointer",
        }
    }
    /// What its shim is compiled with beyond every shim's flags.
    fn define(self) -> Option<&'static str> {
        match self {
            Front::One => Some("-DHL_SEG_ONE"),
            Front::Generic => None,
            Front::Stack => Some("-DHL_SEG_INLINE_STACK"),
            Front::Sp => Some("-DHL_SEG_INLINE_SP"),
        }
    }
}

/// Segments the allocator has for a predictor (DEFAULT: one).
pub fn segments(kind: Kind) -> u32 {
    if kind == Kind::Default {
        1
    } else {
        4
    }
}
