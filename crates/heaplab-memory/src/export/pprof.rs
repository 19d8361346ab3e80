//! pprof's protobuf profile (`go tool pprof`, Pyroscope, speedscope), gzipped
//! as pprof writes it. The messages are `proto/profile.proto`, derived with
//! prost.
//!
//! ```text
//!   string_table[0] = ""
//!   sample_type: alloc_objects/count alloc_space/bytes peak_objects/count
//!                peak_space/bytes leaked_objects/count leaked_space/bytes
//!                temporary_objects/count         (default: peak_space)
//!   mapping   per module: [base, base+size), file name, build-id (hex)
//!   location  per distinct (module, offset): address base+offset, lines =
//!             the functions there, inlined first, the caller last
//!   function  per distinct (name, file)
//!   sample    per stack id with allocations: its locations leaf first, values
//! ```

use crate::analyze::Analysis;
use crate::sites::frames_of;
use crate::symbols::Symbolizer;
use std::collections::HashMap;
use std::io::Write;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
    #[prost(int64, tag = "3")]
    pub column: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.get("");
        s
    }
    fn get(&mut self, v: &str) -> i64 {
        if let Some(&i) = self.index.get(v) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(v.to_string());
        self.index.insert(v.to_string(), i);
        i
    }
}

/// The names of the sample values, in order.
pub const SAMPLE_TYPES: [(&str, &str); 7] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("peak_objects", "count"),
    ("peak_space", "bytes"),
    ("leaked_objects", "count"),
    ("leaked_space", "bytes"),
    ("temporary_objects", "count"),
];

/// The profile of an analysis.
pub fn profile(a: &Analysis, sym: &mut Symbolizer) -> Profile {
    let mut st = Strings::new();
    let mut p = Profile {
        sample_type: SAMPLE_TYPES
            .iter()
            .map(|(t, u)| ValueType { r#type: st.get(t), unit: st.get(u) })
            .collect(),
        ..Profile::default()
    };
    p.default_sample_type = st.get("peak_space");
    let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    p.time_nanos = i(a.meta.start_ns);
    p.duration_nanos = i(a.totals.duration_ns);
    p.period_type = Some(ValueType { r#type: st.get("space"), unit: st.get("bytes") });
    p.period = 1;
    let c = st.get(&format!("heaplab {}: {}", env!("CARGO_PKG_VERSION"), a.trace));
    p.comment.push(c);
    let mut mapping_of: HashMap<String, u64> = HashMap::new();
    let mut locations: HashMap<(String, u64), u64> = HashMap::new();
    let mut functions: HashMap<(String, String), u64> = HashMap::new();
    for m in &a.modules {
        let path = String::from_utf8_lossy(&m.path).into_owned();
        if mapping_of.contains_key(&path) {
            continue;
        }
        let id = p.mapping.len() as u64 + 1;
        p.mapping.push(Mapping {
            id,
            memory_start: m.base,
            memory_limit: m.base.saturating_add(m.size.max(1)),
            file_offset: 0,
            filename: st.get(&path),
            build_id: st.get(&heaplab_trace::model::hex(&m.build_id)),
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        });
        mapping_of.insert(path, id);
    }
    for (id, s) in a.stacks.iter().enumerate() {
        if s.allocs == 0 {
            continue;
        }
        let frames = frames_of(a, id as u32, sym);
        let mut loc_ids = Vec::with_capacity(frames.len());
        if frames.is_empty() {
            loc_ids.push(*locations.entry((String::new(), u64::MAX)).or_insert_with(|| {
                let fid = p.function.len() as u64 + 1;
                let nm = st.get("[no stack recorded]");
                p.function.push(Function {
                    id: fid,
                    name: nm,
                    system_name: nm,
                    ..Function::default()
                });
                let lid = p.location.len() as u64 + 1;
                p.location.push(Location {
                    id: lid,
                    line: vec![Line { function_id: fid, line: 0, column: 0 }],
                    ..Location::default()
                });
                lid
            }));
        }
        for (k, f) in frames.iter().enumerate() {
            let key = (f.module.clone(), f.offset);
            if let Some(&l) = locations.get(&key) {
                loc_ids.push(l);
                continue;
            }
            let lid = p.location.len() as u64 + 1;
            let mapping_id = mapping_of.get(&f.module).copied().unwrap_or(0);
            let base = a.frames[id][k].module;
            let base = a.module_of(base).map_or(0, |m| m.base);
            let names = f.names();
            let mut lines = Vec::new();
            for (n, name) in names.iter().enumerate() {
                let file = f.symbols.get(n).and_then(|s| s.file.clone()).unwrap_or_default();
                let fkey = (name.clone(), file.clone());
                let fid = match functions.get(&fkey) {
                    Some(&x) => x,
                    None => {
                        let fid = p.function.len() as u64 + 1;
                        let nm = st.get(name);
                        p.function.push(Function {
                            id: fid,
                            name: nm,
                            system_name: nm,
                            filename: st.get(&file),
                            start_line: 0,
                        });
                        functions.insert(fkey, fid);
                        fid
                    }
                };
                let line = f.symbols.get(n).and_then(|s| s.line).unwrap_or(0);
                lines.push(Line { function_id: fid, line: i64::from(line), column: 0 });
            }
            p.location.push(Location {
                id: lid,
                mapping_id,
                address: base.wrapping_add(f.offset),
                line: lines,
                is_folded: false,
            });
            locations.insert(key, lid);
            loc_ids.push(lid);
        }
        p.sample.push(Sample {
            location_id: loc_ids,
            value: vec![
                i(s.allocs),
                i(s.bytes),
                i(s.peak_objects),
                i(s.peak_bytes),
                i(s.live_objects),
                i(s.live_bytes),
                i(s.temporary),
            ],
            label: Vec::new(),
        });
    }
    p.string_table = st.table;
    p
}

/// The profile, encoded and gzipped.
pub fn bytes(a: &Analysis, sym: &mut Symbolizer) -> Vec<u8> {
    use prost::Message;
    let raw = profile(a, sym).encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).expect("writing to memory");
    gz.finish().expect("writing to memory")
}
