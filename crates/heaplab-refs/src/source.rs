//! heaplab's own reference stream as an [`AccessSource`] for the simulators,
//! without an allocator: the recorded program's loads and stores alone.
//!
//! ```text
//!   RefsReader ─▶ Ref(object id, offset) ─▶ address = place[id] + offset ─┐
//!             ─▶ Ref(address)            ─▶ address as recorded          ─┼─▶ batch of Access
//!             ─▶ Event (allocation)      ─▶ place[id] = next (bump)      ─┘
//! ```
//!
//! A trace stores heap references as (object, offset), not addresses, so a
//! placement has to be chosen. [`RefsSource`] uses the simplest one that
//! needs no allocator: objects side by side in allocation order, 16-byte
//! aligned, never reused (an allocator that never frees), starting at
//! [`BUMP_BASE`], far from any address a program uses. To see a real
//! allocator's placement and its own references, measure it
//! (`crate::measure`, `heaplab locality`).

use heaplab_sim::{Access, AccessSource, Kind, Next};
use heaplab_trace::refs::{usable, RefItem, RefsReader, Target};
use heaplab_trace::TraceError;
use std::io::Read;

/// Where the bump placement starts: bit 45, above every user address a
/// program under Valgrind gets.
pub const BUMP_BASE: u64 = 1 << 45;

/// The recorded references, heap objects placed side by side.
pub struct RefsSource<R: Read> {
    refs: RefsReader<R>,
    items: Vec<RefItem>,
    pos: usize,
    place: Vec<u64>,
    next: u64,
    /// Accesses handed out.
    pub accesses: u64,
    done: bool,
}

impl<R: Read> RefsSource<R> {
    pub fn new(refs: RefsReader<R>) -> Self {
        RefsSource {
            refs,
            items: Vec::new(),
            pos: 0,
            place: Vec::new(),
            next: BUMP_BASE,
            accesses: 0,
            done: false,
        }
    }

    /// The reader (for its counts and the trace's header).
    pub fn reader(&self) -> &RefsReader<R> {
        &self.refs
    }
}

impl<R: Read> AccessSource for RefsSource<R> {
    type Error = TraceError;

    fn next_batch(&mut self, buf: &mut Vec<Access>) -> Result<Next, TraceError> {
        buf.clear();
        if self.done {
            return Ok(Next::End);
        }
        let target = buf.capacity().max(4096);
        while buf.len() < target {
            if self.pos == self.items.len() {
                self.refs.next_batch(&mut self.items)?;
                self.pos = 0;
                if self.items.is_empty() {
                    self.done = true;
                    self.accesses += buf.len() as u64;
                    return Ok(Next::End);
                }
            }
            match &self.items[self.pos] {
                RefItem::Ref(r) => {
                    let kind = if r.write { Kind::Write } else { Kind::Read };
                    let addr = match r.target {
                        Target::Object { id, offset } => self.place[id as usize] + offset,
                        Target::Other { addr } => addr,
                    };
                    buf.push(Access::new(addr, r.size, kind));
                }
                RefItem::Event { event, .. } => {
                    if let Some(id) = event.id {
                        if self.place.len() <= id as usize {
                            self.place.resize(id as usize + 1, 0);
                        }
                        self.place[id as usize] = self.next;
                        self.next += usable(event.size);
                    }
                }
                RefItem::End { .. } => {}
            }
            self.pos += 1;
        }
        self.accesses += buf.len() as u64;
        Ok(Next::More)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heaplab_trace::refs::{write_block, RefsEncoder, OPTION};
    use heaplab_trace::{
        End, Kind as EvKind, Meta, NewEvent, TraceReader, TraceWriter, WriterOptions,
    };

    #[test]
    fn objects_are_placed_side_by_side_and_others_keep_their_address() {
        let meta = Meta {
            pid: 1,
            pointer_size: 8,
            time_unit_ns: 1,
            options: Some(OPTION.into()),
            ..Meta::default()
        };
        let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default()).unwrap();
        let t = w.add_thread(1, "main");
        let mut enc = RefsEncoder::new();
        let a = w.record(&NewEvent::alloc(EvKind::Malloc, 24).at(t, 0)).unwrap().unwrap();
        enc.events(1, 1, 1);
        let b = w.record(&NewEvent::alloc(EvKind::Malloc, 100).at(t, 1)).unwrap().unwrap();
        enc.events(1, 1, 2);
        enc.heap(b, 8, 8, true, 3);
        enc.heap(a, 16, 4, false, 4);
        enc.other(0x7ffe_1234, 8, false, 5);
        enc.end(6);
        write_block(&mut w, &mut enc).unwrap();
        let bytes = w.finish(&End::default()).unwrap();
        let mut src = RefsSource::new(RefsReader::new(TraceReader::new(&bytes[..], "t").unwrap()));
        let mut buf = Vec::with_capacity(16);
        assert_eq!(src.next_batch(&mut buf).unwrap(), Next::End);
        let got: Vec<(u64, u32, Kind)> = buf.iter().map(|x| (x.addr, x.size, x.kind)).collect();
        assert_eq!(
            got,
            vec![
                (BUMP_BASE + 32 + 8, 8, Kind::Write), // b comes after a's 32 usable bytes
                (BUMP_BASE + 16, 4, Kind::Read),
                (0x7ffe_1234, 8, Kind::Read),
            ]
        );
        assert_eq!(src.accesses, 3);
    }
}
