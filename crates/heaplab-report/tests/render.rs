//! The report's output is well-formed and self-contained, and charts put what
//! they are given where it belongs.

use heaplab_report::*;

/// A crude XML well-formedness check: every start tag is closed in order.
fn balanced(s: &str) -> bool {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').unwrap();
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') || tag.starts_with('?') {
            continue;
        }
        let name: String =
            tag.trim_start_matches('/').chars().take_while(|c| c.is_alphanumeric()).collect();
        if tag.starts_with('/') {
            if stack.pop().as_deref() != Some(name.as_str()) {
                return false;
            }
        } else if !tag.ends_with('/') && !["meta", "br"].contains(&name.as_str()) {
            stack.push(name);
        }
    }
    stack.is_empty()
}

#[test]
fn bars_draw_one_rect_per_value_and_mark_missing() {
    let b = Bars {
        title: "t <&>".into(),
        groups: vec!["a".into(), "b".into()],
        series: vec![
            Series::new("s1", vec![Some(1.0), Some(2.0)]),
            Series::new("s2", vec![None, Some(4.0)]),
        ],
        ..Bars::default()
    };
    let svg = b.to_svg();
    assert_eq!(svg.matches("<rect").count(), 3 + 2, "3 bars + 2 legend swatches");
    assert_eq!(svg.matches("×").count(), 1, "one missing value");
    assert!(svg.contains("t &lt;&amp;&gt;"));
    assert!(balanced(&svg), "{svg}");
}

#[test]
fn bar_heights_follow_the_scale() {
    let b = Bars {
        groups: vec!["g".into()],
        series: vec![Series::new("half", vec![Some(50.0)]), Series::new("full", vec![Some(100.0)])],
        height: 400.0,
        ..Bars::default()
    };
    let svg = b.to_svg();
    let heights: Vec<f64> = svg
        .split("<rect")
        .skip(1)
        .map(|r| r.split("height=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(heights.len(), 2);
    assert!((heights[1] / heights[0] - 2.0).abs() < 0.01, "{heights:?}");
}

#[test]
fn clipped_bars_show_their_value() {
    let b = Bars {
        groups: vec!["g".into(), "h".into()],
        series: vec![Series::new("s", vec![Some(10.0), Some(5000.0)])],
        clip: Some(100.0),
        ..Bars::default()
    };
    let svg = b.to_svg();
    assert!(svg.contains(">5000</text>"), "{svg}");
}

#[test]
fn log_lines_skip_nonpositive_points() {
    let l = Lines {
        title: "faults".into(),
        log_x: true,
        log_y: true,
        series: vec![LineSeries::new("a", vec![(1.0, 10.0), (10.0, 0.0), (100.0, 1000.0)])],
        ..Lines::default()
    };
    let svg = l.to_svg();
    assert_eq!(svg.matches("<circle").count(), 2);
    assert!(balanced(&svg));
}

#[test]
fn page_is_self_contained() {
    let mut r = Report::new("r");
    r.heading("h").paragraph("a < b").figure(&Bars::default().to_svg(), "cap");
    r.table(&Table {
        caption: Some("c".into()),
        header: vec!["x".into(), "y".into()],
        rows: vec![
            vec![Cell::text("a"), Cell::Num(1.5, 2)],
            vec![Cell::text("b"), Cell::opt(None, 1)],
        ],
    });
    let h = r.to_html();
    assert!(balanced(&h), "{h}");
    assert!(
        !h.contains("http://")
            || h.matches("http://").count()
                == h.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
    );
    // No script unless tables sort; then one inline script, nothing loaded
    // from elsewhere.
    assert_eq!(h.matches("<script").count(), 0);
    r.sortable_tables();
    let h = r.to_html();
    assert_eq!(h.matches("<script").count(), 1);
    assert!(!h.contains("<script src") && !h.contains("<link") && !h.contains(" src=\"http"));
    assert!(h.contains("<td class=\"num\">1.50</td>") && h.contains("a &lt; b"));
}

#[test]
fn documents_are_framed_from_data_urls_and_cells_sort_by_value() {
    let mut r = Report::new("r");
    r.document(
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><script>x()</script></svg>",
        100,
        "flame",
    );
    r.table(&Table {
        caption: None,
        header: vec!["bytes".into()],
        rows: vec![vec![Cell::Bytes(1536)], vec![Cell::Int(1234567)], vec![Cell::Nanos(1_500_000)]],
    });
    let h = r.to_html();
    assert!(h.contains("src=\"data:image/svg+xml;base64,"), "{h}");
    assert!(!h.contains("x()</script>"), "the document's script stays inside its frame");
    assert!(
        h.contains("data-v=\"1536\">1.5 KiB<")
            && h.contains(">1,234,567<")
            && h.contains(">1.50 ms<")
    );
    assert_eq!(base64(b"any carnal pleas"), "YW55IGNhcm5hbCBwbGVhcw==");
    assert_eq!(base64(b"any carnal pleasu"), "YW55IGNhcm5hbCBwbGVhc3U=");
    assert_eq!(base64(b"any carnal pleasur"), "YW55IGNhcm5hbCBwbGVhc3Vy");
}

#[test]
fn stacked_areas_label_tall_bands_directly() {
    let a = StackedArea {
        title: "t".into(),
        x: vec![0.0, 1.0, 2.0],
        bands: vec![("big".into(), vec![10.0, 20.0, 30.0]), ("tiny".into(), vec![0.0, 0.0, 0.01])],
        line: Some(("max".into(), vec![10.0, 25.0, 31.0])),
        ..StackedArea::default()
    };
    let svg = a.to_svg();
    assert!(balanced(&svg));
    assert_eq!(svg.matches("<polygon").count(), 2);
    assert_eq!(svg.matches(">big</text>").count(), 2, "legend and direct label: {svg}");
    assert_eq!(svg.matches(">tiny</text>").count(), 1, "too thin for a direct label");
}

/// Issue 17, class 5: text from a trace cannot smuggle markup or control
/// characters into a report.
#[test]
fn report_text_is_escaped_control_characters_included() {
    let e = heaplab_report::esc("<script>\"x\u{1b}[31m\u{0}\u{9b}'&");
    assert_eq!(e, "&lt;script&gt;&quot;x\\x1b[31m\\x00\\u{9b}&#39;&amp;");
}
