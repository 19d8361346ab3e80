//! Paper 001's published numbers (Seidl and Zorn, ASPLOS 1998), to print
//! beside heaplab's for today's programs: Tables 3 and 4 as printed, and
//! the numbers the text gives for Figures 3, 4 and 6 (the figures are
//! curves; only what §5.2–§5.4 state in words is here, each with where it
//! is said). Nothing here is measured: these are the paper's.

use serde::Serialize;

/// One program's row of Table 3 (8 KB pages per segment relative to
/// DEFAULT's; HR's absolute count beside it) and Table 4 (references per
/// page per segment relative to DEFAULT's), for PATH and STACK.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PaperRow {
    pub program: &'static str,
    /// Table 3: DEFAULT's pages; per predictor other, SL, HR, not-HR, HR's
    /// absolute pages, total.
    pub default_pages: u64,
    pub path_pages: [f64; 4],
    pub path_hr_pages: u64,
    pub path_total: f64,
    pub stack_pages: [f64; 4],
    pub stack_hr_pages: u64,
    pub stack_total: f64,
    /// Table 4: DEFAULT's references per page (thousands); per predictor
    /// other, SL, HR, not-HR (0.000 printed where a segment has no page).
    pub default_refs_k: f64,
    pub path_density: [f64; 4],
    pub stack_density: [f64; 4],
}

/// Tables 3 and 4 of the paper, as printed.
pub const TABLES: [PaperRow; 6] = [
    PaperRow {
        program: "CHAMELEON",
        default_pages: 116,
        path_pages: [0.974, 0.000, 0.009, 0.026],
        path_hr_pages: 1,
        path_total: 1.017,
        stack_pages: [0.560, 0.000, 0.129, 0.319],
        stack_hr_pages: 15,
        stack_total: 1.017,
        default_refs_k: 16.1,
        path_density: [1.012, 0.000, 1.189, 0.168],
        stack_density: [0.550, 0.000, 4.960, 0.158],
    },
    PaperRow {
        program: "ESPRESSO",
        default_pages: 54,
        path_pages: [4.593, 0.519, 0.093, 0.000],
        path_hr_pages: 5,
        path_total: 5.222,
        stack_pages: [1.000, 0.000, 0.037, 0.000],
        stack_hr_pages: 2,
        stack_total: 1.074,
        default_refs_k: 7268.8,
        path_density: [0.154, 0.531, 0.170, 0.000],
        stack_density: [0.978, 0.000, 0.605, 0.000],
    },
    PaperRow {
        program: "GS",
        default_pages: 395,
        path_pages: [0.000, 0.000, 1.091, 0.585],
        path_hr_pages: 431,
        path_total: 1.681,
        stack_pages: [0.000, 0.000, 0.681, 0.585],
        stack_hr_pages: 269,
        stack_total: 1.271,
        default_refs_k: 277.5,
        path_density: [0.000, 0.000, 0.915, 0.003],
        stack_density: [0.000, 0.000, 1.462, 0.008],
    },
    PaperRow {
        program: "SIS",
        default_pages: 318,
        path_pages: [0.906, 0.000, 0.003, 0.053],
        path_hr_pages: 1,
        path_total: 0.965,
        stack_pages: [0.374, 0.028, 0.050, 0.742],
        stack_hr_pages: 16,
        stack_total: 1.195,
        default_refs_k: 785.2,
        path_density: [1.098, 0.000, 0.000, 0.103],
        stack_density: [0.755, 17.369, 1.112, 0.229],
    },
    PaperRow {
        program: "VIS",
        default_pages: 1993,
        path_pages: [1.000, 0.002, 0.000, 0.000],
        path_hr_pages: 0,
        path_total: 1.003,
        stack_pages: [0.930, 0.028, 0.064, 0.000],
        stack_hr_pages: 127,
        stack_total: 1.022,
        default_refs_k: 77.9,
        path_density: [1.000, 0.018, 0.000, 0.000],
        stack_density: [0.378, 0.740, 9.861, 0.000],
    },
    PaperRow {
        program: "YACR",
        default_pages: 174,
        path_pages: [0.891, 0.000, 0.109, 0.000],
        path_hr_pages: 19,
        path_total: 1.011,
        stack_pages: [0.891, 0.000, 0.109, 0.000],
        stack_hr_pages: 19,
        stack_total: 1.011,
        default_refs_k: 52.5,
        path_density: [0.544, 0.000, 4.720, 0.000],
        stack_density: [0.544, 0.000, 4.718, 0.000],
    },
];

/// A number the paper's text gives for one of its figures.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stated {
    pub figure: u32,
    pub program: &'static str,
    pub predictor: &'static str,
    /// What the number is, in the table's words.
    pub what: &'static str,
    /// The number (a ratio to DEFAULT, or a reduction as a share).
    pub value: f64,
    /// Where the paper says it.
    pub said: &'static str,
}

/// Figures 3, 4 and 6 as the text reports them.
pub const STATED: [Stated; 13] = [
    Stated {
        figure: 3,
        program: "CHAMELEON",
        predictor: "STACK",
        what: "references to the most referenced page / DEFAULT's",
        value: 1.6,
        said: "§5.3 CHAMELEON",
    },
    Stated {
        figure: 3,
        program: "CHAMELEON",
        predictor: "STACK",
        what: "references to the 25 most referenced pages / DEFAULT's",
        value: 1.1,
        said: "§5.3 CHAMELEON",
    },
    Stated {
        figure: 3,
        program: "SIS",
        predictor: "STACK",
        what: "references to the 14 most referenced pages / DEFAULT's",
        value: 1.2,
        said: "§5.3 SIS",
    },
    Stated {
        figure: 3,
        program: "VIS",
        predictor: "STACK",
        what: "references to the most referenced pages / DEFAULT's, at most",
        value: 15.6,
        said: "§5.2",
    },
    Stated {
        figure: 3,
        program: "all six",
        predictor: "STACK",
        what: "references to the most referenced pages / DEFAULT's, at most",
        value: 8.5,
        said: "§6",
    },
    Stated {
        figure: 4,
        program: "SIS",
        predictor: "STACK",
        what: "largest page-fault reduction (up to 182 pages)",
        value: 0.95,
        said: "§5.3 SIS",
    },
    Stated {
        figure: 4,
        program: "VIS",
        predictor: "STACK",
        what: "largest page-fault reduction",
        value: 0.90,
        said: "§5.3 VIS",
    },
    Stated {
        figure: 4,
        program: "GS",
        predictor: "STACK",
        what: "page-fault reduction over a wide range of memory sizes, at most",
        value: 0.50,
        said: "§5.3 GS",
    },
    Stated {
        figure: 4,
        program: "SIS, VIS",
        predictor: "STACK",
        what: "page-fault reduction across a range of memory sizes, at least",
        value: 0.80,
        said: "§5.2",
    },
    Stated {
        figure: 6,
        program: "all six",
        predictor: "STACK",
        what: "32 KB direct-mapped misses / DEFAULT's, all programs together",
        value: 0.92,
        said: "§5.4 (\"approximately an 8% reduction\")",
    },
    Stated {
        figure: 6,
        program: "GS, YACR",
        predictor: "STACK",
        what: "32 KB direct-mapped misses / DEFAULT's: above 1 (the only two)",
        value: f64::NAN,
        said: "§5.4",
    },
    Stated {
        figure: 6,
        program: "SIS, VIS",
        predictor: "STACK",
        what: "256 KB direct-mapped: the largest improvements (as in Figure 4)",
        value: f64::NAN,
        said: "§5.4",
    },
    Stated {
        figure: 6,
        program: "YACR",
        predictor: "STACK",
        what: "256 KB direct-mapped: the worst of the six for STACK",
        value: f64::NAN,
        said: "§5.4",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The printed totals are the sums of the printed segments (to rounding),
    /// which catches a transcription slip.
    #[test]
    fn table3_totals_add_up() {
        for r in TABLES {
            for (seg, total) in [(r.path_pages, r.path_total), (r.stack_pages, r.stack_total)] {
                let sum: f64 = seg.iter().sum();
                assert!(
                    (sum - total).abs() < 0.08,
                    "{}: {seg:?} sums to {sum}, not {total}",
                    r.program
                );
            }
            // HR's absolute pages are its share of DEFAULT's, to rounding
            for (share, abs) in
                [(r.path_pages[2], r.path_hr_pages), (r.stack_pages[2], r.stack_hr_pages)]
            {
                let want = share * r.default_pages as f64;
                assert!(
                    (want - abs as f64).abs() <= 1.5,
                    "{}: HR {share} of {} is not {abs}",
                    r.program,
                    r.default_pages
                );
            }
        }
    }
}
