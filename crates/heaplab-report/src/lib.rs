//! Self-contained HTML reports with figures in the style of the papers: grouped
//! bar charts (a group per program, a bar per allocator, as paper 002's
//! Figures 4 to 6 draw them), line charts with linear or log axes (miss rates
//! against cache size, page faults against memory), and tables. Figures are
//! inline SVG; the page needs no network. A page that asks for it
//! ([`Report::sortable_tables`]) carries one inline script that sorts a
//! table by the column whose header is clicked; a figure that is a whole
//! SVG document with its own script (a flame graph) sits in a frame of its
//! own, from a `data:` URL ([`Report::document`]), so it fetches nothing and
//! its script sees only itself. Figures scale down to fit a narrow window.
//! A [`Table`] renders as terminal text too ([`Table::to_text`]), with the
//! same cells shown the same way ([`num`] formats counts).
//!
//! Every heaplab study draws its figures with this crate: `heaplab compare`
//! (instructions, share, footprint, wall-time ratios), and the locality,
//! synthesis and segregation studies.
//!
//! ```
//! use heaplab_report::*;
//! let chart = Bars {
//!     title: "Instructions per malloc".into(),
//!     y_label: "instructions".into(),
//!     groups: vec!["perl".into(), "make".into()],
//!     series: vec![
//!         Series::new("firstfit", vec![Some(120.0), Some(80.5)]),
//!         Series::new("bsd", vec![Some(60.0), None]),
//!     ],
//!     ..Bars::default()
//! };
//! let mut page = Report::new("heaplab compare");
//! page.heading("Speed");
//! page.figure(&chart.to_svg(), "Figure 1: mean instructions per call (callgrind).");
//! let html = page.to_html();
//! assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg") && html.contains("firstfit"));
//! ```

mod area;
mod axis;
mod bars;
pub mod human;
mod lines;
pub mod num;
mod table;

pub use area::{Overlay, StackedArea};
pub use axis::{fmt_num, Scale};
pub use bars::{Bars, Series};
pub use lines::{LineSeries, Lines};
pub use table::{Cell, Table};

/// Colours for series: Paul Tol's "muted" scheme, whose nine colours stay
/// apart for readers with any common colour-vision deficiency (and in grey).
/// Past nine, bars repeat them hatched ([`swatch`]), so sixteen allocators
/// get sixteen keys; charts also label bars directly.
pub const PALETTE: [&str; 9] = [
    "#332288", "#88ccee", "#44aa99", "#117733", "#999933", "#ddcc77", "#cc6677", "#882255",
    "#aa4499",
];

/// The colour of series `i`.
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Writes the `<defs>` of hatched fills for series past the palette (when
/// `n` needs them) into `o`, and returns their id prefix, unique in the
/// process, so that several charts inline in one page do not share ids.
pub fn swatch_defs(o: &mut String, n: usize) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let id = format!("hlp{}", NEXT.fetch_add(1, Ordering::Relaxed));
    if n > PALETTE.len() {
        o.push_str("<defs>");
        for i in PALETTE.len()..n {
            o.push_str(&format!(
                r#"<pattern id="{id}-{i}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="{}"/><rect width="2.2" height="6" fill="white"/></pattern>"#,
                color(i)
            ));
        }
        o.push_str("</defs>");
    }
    id
}

/// The fill of series `i`: its colour, hatched past the palette (ids from
/// [`swatch_defs`]).
pub fn swatch(ids: &str, i: usize) -> String {
    if i < PALETTE.len() {
        color(i).to_string()
    } else {
        format!("url(#{ids}-{i})")
    }
}

/// Escapes text for XML and HTML (element content and attribute values).
/// Every string from a trace (paths, command lines, names) goes through
/// here; control characters, which neither XML nor HTML allows, are shown
/// as `\xNN` (`\u{NN}` for the C1 range) instead.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            '\n' | '\t' => o.push(c),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                o.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if (0x80..0xa0).contains(&(c as u32)) => {
                o.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => o.push(c),
        }
    }
    o
}

enum Block {
    Heading(String),
    Paragraph(String),
    Figure { svg: String, caption: String },
    Table(String),
    Raw(String),
    Document { svg: String, height: u64, caption: String },
}

/// An HTML page assembled from headings, paragraphs, figures and tables.
pub struct Report {
    title: String,
    blocks: Vec<Block>,
    sortable: bool,
}

impl Report {
    pub fn new(title: &str) -> Report {
        Report { title: title.to_string(), blocks: Vec::new(), sortable: false }
    }

    /// A section heading.
    pub fn heading(&mut self, text: &str) -> &mut Self {
        self.blocks.push(Block::Heading(text.to_string()));
        self
    }

    /// A paragraph of plain text (escaped).
    pub fn paragraph(&mut self, text: &str) -> &mut Self {
        self.blocks.push(Block::Paragraph(text.to_string()));
        self
    }

    /// An SVG figure (from [`Bars::to_svg`] or [`Lines::to_svg`]) with its caption.
    pub fn figure(&mut self, svg: &str, caption: &str) -> &mut Self {
        self.blocks.push(Block::Figure { svg: svg.to_string(), caption: caption.to_string() });
        self
    }

    /// A whole SVG document with its own script (an inferno flame graph),
    /// shown in a frame `height` pixels tall, from a `data:` URL: nothing is
    /// fetched, and its script cannot reach the page.
    pub fn document(&mut self, svg: &str, height: u64, caption: &str) -> &mut Self {
        self.blocks.push(Block::Document {
            svg: svg.to_string(),
            height,
            caption: caption.to_string(),
        });
        self
    }

    /// A table.
    pub fn table(&mut self, t: &Table) -> &mut Self {
        self.blocks.push(Block::Table(t.to_html()));
        self
    }

    /// Tables sort when their heading is clicked: the page then carries one
    /// inline script (nothing fetched). Off by default: a page without it
    /// has no script at all.
    pub fn sortable_tables(&mut self) -> &mut Self {
        self.sortable = true;
        self
    }

    /// HTML the caller has already escaped, as is.
    pub fn raw(&mut self, html: &str) -> &mut Self {
        self.blocks.push(Block::Raw(html.to_string()));
        self
    }

    /// The whole page: one file, inline CSS, no external resources.
    pub fn to_html(&self) -> String {
        let mut o = String::new();
        o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
        o.push_str(&format!("<title>{}</title>\n", esc(&self.title)));
        o.push_str(CSS);
        o.push_str("</head><body>\n");
        o.push_str(&format!("<h1>{}</h1>\n", esc(&self.title)));
        for b in &self.blocks {
            match b {
                Block::Heading(t) => o.push_str(&format!("<h2>{}</h2>\n", esc(t))),
                Block::Paragraph(t) => o.push_str(&format!("<p>{}</p>\n", esc(t))),
                Block::Figure { svg, caption } => {
                    o.push_str("<figure>\n");
                    o.push_str(svg);
                    o.push_str(&format!("\n<figcaption>{}</figcaption></figure>\n", esc(caption)));
                }
                Block::Document { svg, height, caption } => {
                    o.push_str(&format!(
                        "<figure><iframe class=\"doc\" title=\"{}\" style=\"height:{}px\" sandbox=\"allow-scripts\" src=\"data:image/svg+xml;base64,{}\"></iframe>\n<figcaption>{}</figcaption></figure>\n",
                        esc(caption),
                        height + 4,
                        base64(svg.as_bytes()),
                        esc(caption)
                    ));
                }
                Block::Table(h) => {
                    o.push_str("<div class=\"scroll\">");
                    o.push_str(h);
                    o.push_str("</div>\n");
                }
                Block::Raw(h) => {
                    o.push_str(h);
                    o.push('\n');
                }
            }
        }
        if self.sortable {
            o.push_str(SORT_SCRIPT);
        }
        o.push_str("</body></html>\n");
        o
    }
}

const CSS: &str = "<style>
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
figure{margin:1.5em 0}figcaption{font-size:.9em;color:#444;margin-top:.3em}
svg text{font-family:system-ui,-apple-system,'Segoe UI',sans-serif}
table{border-collapse:collapse;font-size:.85em;margin:1em 0}
th,td{border:1px solid #ccc;padding:.2em .5em}th{background:#f3f3f3}
td.num{text-align:right;font-variant-numeric:tabular-nums}td.missing{color:#a00}
caption{caption-side:top;text-align:left;font-weight:bold;margin-bottom:.3em}
figure svg{max-width:100%;height:auto}iframe.doc{width:100%;border:0}
.scroll{overflow-x:auto}th.sortable{cursor:pointer}th.sortable:after{content:' \\2195';color:#999}
th[aria-sort=ascending]:after{content:' \\25B2';color:#333}th[aria-sort=descending]:after{content:' \\25BC';color:#333}
</style>
";

/// Sorts a table by the clicked column (numbers by value, from a cell's
/// `data-v` when it has one, else its text), toggling the direction.
const SORT_SCRIPT: &str = "<script>
document.querySelectorAll('table').forEach(function(t){
 var h=t.tHead;if(!h||!t.tBodies.length)return;
 Array.prototype.forEach.call(h.rows[0].cells,function(th,i){
  th.classList.add('sortable');th.tabIndex=0;
  var go=function(){
   var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows);
   var asc=th.getAttribute('aria-sort')!=='ascending';
   Array.prototype.forEach.call(h.rows[0].cells,function(c){c.removeAttribute('aria-sort');});
   th.setAttribute('aria-sort',asc?'ascending':'descending');
   var key=function(r){var c=r.cells[i];if(!c)return '';var v=c.getAttribute('data-v');
    if(v===null){v=c.textContent.replace(/[,%\\s]/g,'');}var n=parseFloat(v);return isNaN(n)?c.textContent:n;};
   rows.sort(function(a,b){var x=key(a),y=key(b);
    var r=(typeof x==='number'&&typeof y==='number')?x-y:String(x).localeCompare(String(y));return asc?r:-r;});
   rows.forEach(function(r){b.appendChild(r);});
  };
  th.addEventListener('click',go);
  th.addEventListener('keydown',function(e){if(e.key==='Enter')go();});
 });
});
</script>
";

/// Standard base64 (RFC 4648, with padding).
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= c.len() {
                o.push(A[(n >> (18 - 6 * k)) as usize & 63] as char);
            } else {
                o.push('=');
            }
        }
    }
    o
}
