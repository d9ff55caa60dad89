//! What the HTML pages and flame graphs say without hovering, read from
//! their source (no browser: html_report.rs loads them in Chromium): a key
//! for every colour a timeline draws, histograms on a log axis, an iostat
//! chart or the reason there is none, heatmaps apart per kind of request
//! with their colour scale, the blocked-in stack as text, the diff page's
//! distributions, settings and differential flame graph, and flame graph
//! units that agree between subtitle and hover.

use crate::common;

use common::*;
use std::collections::BTreeSet;
use std::path::Path;

fn page(args: &[&str]) -> String {
    let dir = tempdir();
    let out = dir.path().join("page.html");
    run(iosleuth()
        .args(args)
        .args(["--format", "html", "-o"])
        .arg(&out));
    std::fs::read_to_string(&out).unwrap()
}

/// Each chart's SVG source.
fn charts(html: &str) -> Vec<&str> {
    html.split("<svg class=\"chart\"")
        .skip(1)
        .map(|s| s.split("</svg>").next().unwrap())
        .collect()
}

/// The value of every `attr="…"` after `prefix` in `s`.
fn values<'a>(s: &'a str, prefix: &str) -> Vec<&'a str> {
    s.split(prefix)
        .skip(1)
        .map(|v| v.split('"').next().unwrap())
        .collect()
}

#[test]
fn every_colour_of_a_timeline_has_a_key_entry() {
    for cap in [
        "tests/fixtures/slowdev-fsync.cap",
        "tests/fixtures/stacks-journal-4m.cap",
        "tests/fixtures/rt-burner.cap",
    ] {
        let html = page(&["report", cap]);
        let timelines: Vec<&str> = charts(&html)
            .into_iter()
            .filter(|c| c.contains("<g class=\"key\">"))
            .collect();
        assert!(!timelines.is_empty(), "{cap}: no timeline with a key");
        for t in timelines {
            let (bars, key) = t.split_once("<g class=\"key\">").unwrap();
            let drawn: BTreeSet<&str> = values(bars, "<rect class=\"")
                .into_iter()
                .filter(|c| *c != "plot")
                .collect();
            let keyed: BTreeSet<&str> = values(key, "<rect class=\"").into_iter().collect();
            for c in &drawn {
                assert!(keyed.contains(c), "{cap}: {c} drawn without a key entry");
            }
        }
    }
    // The slow journal write's timeline: the parts it has, in words.
    let html = page(&["report", "tests/fixtures/slowdev-fsync.cap"]);
    for name in [">at the device<", ">the request waited for<", ">on CPU<"] {
        assert!(html.contains(name), "{name}");
    }
}

#[test]
fn histograms_count_on_a_log_axis() {
    let html = page(&["report", "tests/fixtures/slowdev-fsync.cap"]);
    let hists: Vec<&str> = charts(&html)
        .into_iter()
        .filter(|c| c.contains("histogram</text>") || c.contains("like runqlat</text>"))
        .collect();
    assert!(hists.len() >= 4, "{}", hists.len());
    for h in hists {
        assert!(h.contains("data-y-scale=\"log\""), "{h}");
        assert!(h.contains("(log scale)</text>"));
    }
    // The two 150 ms requests: a bar of 2 whose top is well above the
    // axis (on a linear axis of 154 it was a pixel).
    let q2c = charts(&html)
        .into_iter()
        .find(|c| c.contains("Q2C latency histogram</text>"))
        .unwrap();
    let bar = q2c
        .split("<rect class=\"bar\"")
        .last()
        .filter(|b| b.contains("<title>131072-262143: 2</title>"))
        .expect("the 128-256 ms bucket, last");
    let height: f64 = values(bar, "height=\"")[0].parse().unwrap();
    assert!(height > 20.0, "{height}");
    // Every bucket has its label, each its low bound in binary units.
    let ticks: Vec<&str> = q2c
        .split("<text class=\"tick\"")
        .filter_map(|t| t.split('>').nth(1)?.split('<').next())
        .collect();
    let lows: Vec<String> = (0..18)
        .map(|k| match k {
            0 => "0".to_string(),
            k if k < 10 => (1u64 << k).to_string(),
            k => format!("{}Ki", 1u64 << (k - 10)),
        })
        .collect();
    for low in &lows {
        assert!(ticks.contains(&low.as_str()), "no label {low} in {ticks:?}");
    }
}

#[test]
fn a_short_trace_gets_an_iostat_chart_at_a_shorter_interval() {
    // 0.34 s: one one-second interval.
    let html = page(&["report", "tests/fixtures/slowdev-fsync.cap"]);
    let iostat: Vec<&str> = charts(&html)
        .into_iter()
        .filter(|c| c.contains("(iostat -x)</text>"))
        .collect();
    assert!(!iostat.is_empty());
    for c in &iostat {
        assert!(c.contains(", per 10 ms (iostat -x)"), "{c}");
        let points = c.matches("<circle ").count() / 2;
        assert!(points >= 10, "{points}");
    }
    assert!(html.contains("iostat's columns per 10 ms, computed from every request"));
    // Too few requests: the page says why there is no chart.
    let html = page(&["report", "tests/fixtures/fsync-4k.cap"]);
    let said = html.contains("No iostat chart: ") || html.contains("(iostat -x)</text>");
    assert!(said, "neither an iostat chart nor why not");
}

#[test]
fn heatmaps_keep_reads_and_writes_apart_with_a_colour_scale() {
    let html = page(&["report", "tests/fixtures/wbt-default.cap"]);
    let heatmaps: Vec<&str> = charts(&html)
        .into_iter()
        .filter(|c| c.contains("class=\"cell\""))
        .collect();
    let of = |kind: &str| {
        heatmaps
            .iter()
            .filter(|c| c.contains(&format!("<g class=\"cells {kind}\">")))
            .count()
    };
    // Q2C and D2C, each a heatmap of reads and one of writes.
    assert!(
        of("read") >= 2 && of("write") >= 2,
        "{} {}",
        of("read"),
        of("write")
    );
    for h in &heatmaps {
        let title = values(h, "aria-label=\"")[0];
        assert!(
            title.ends_with(" reads") || title.ends_with(" writes") || title.ends_with(" flushes"),
            "{title}"
        );
        // One kind of cell per chart, and the scale that reads them.
        assert_eq!(h.matches("<g class=\"cells ").count(), 2, "{title}");
        assert!(h.contains(">requests per cell: 1</text>") && h.contains(">slowest</text>"));
    }
}

#[test]
fn the_stack_a_slow_operation_blocked_in_is_text_under_its_timeline() {
    let html = page(&["report", "tests/fixtures/stacks-journal-4m.cap"]);
    let stacks: Vec<&str> = html
        .split("<p class=\"stack\">")
        .skip(1)
        .map(|s| s.split("</p>").next().unwrap())
        .collect();
    assert!(!stacks.is_empty());
    // Outside any SVG title: on the page, not only on hover.
    assert!(
        stacks.iter().any(|s| s.contains(
            "<code>add_transaction_credits ← start_this_handle ← jbd2__journal_start ← "
        )),
        "{stacks:?}"
    );
    assert!(stacks[0].starts_with("Blocked "), "{}", stacks[0]);
}

#[test]
fn diff_page_shows_distributions_settings_and_the_differential_flame_graph() {
    let html = page(&[
        "diff",
        "tests/fixtures/stacks-journal-1024m.cap",
        "tests/fixtures/stacks-journal-4m.cap",
    ]);
    assert!(html.contains("<td>ext4 loop0 journal_kib</td><td>1048576</td><td>4096</td>"));
    assert!(html.contains("<h2>Latency of each operation, both sides</h2>"));
    assert!(
        html.contains("<td>probe randwrite</td><td>3138</td>"),
        "the baseline's count"
    );
    assert!(html.contains("probe randwrite: operations by latency, share of each side</text>"));
    assert_eq!(html.matches("<iframe class=\"flame\"").count(), 1);
    assert!(html.contains("Off CPU, differential"));
    // Without stacks: no flame graph; the settings said even when none differ.
    let html = page(&[
        "diff",
        "tests/fixtures/healthy-run1.cap",
        "tests/fixtures/healthy-run2.cap",
    ]);
    assert!(!html.contains("<iframe"));
    assert!(html.contains("<h2>Settings that differ</h2><p class=\"settings-none\">"));
}

fn subtitle_and_titles(svg: &Path) -> (String, Vec<String>) {
    let text = std::fs::read_to_string(svg).unwrap();
    let sub = text
        .split("<text id=\"subtitle\"")
        .nth(1)
        .and_then(|s| s.split_once('>'))
        .map(|(_, s)| s.split('<').next().unwrap().to_string())
        .unwrap_or_default();
    let titles = text
        .split("<title>")
        .skip(1)
        .map(|t| t.split("</title>").next().unwrap().to_string())
        .collect();
    (sub, titles)
}

/// The unit of each frame's hover text, `name (1,234 UNIT, 5.00%)`.
fn hover_units(titles: &[String]) -> BTreeSet<String> {
    titles
        .iter()
        .filter_map(|t| t.rsplit_once(" (").map(|(_, r)| r.to_string()))
        .filter_map(|r| r.split(", ").next().map(String::from))
        .filter_map(|n| n.split_once(' ').map(|(_, unit)| unit.to_string()))
        .collect()
}

#[test]
fn flame_graph_subtitles_and_hovers_name_one_unit() {
    let dir = tempdir();
    let draw = |args: &[&str], name: &str| {
        let svg = dir.path().join(name);
        let o = outcome_of(iosleuth().arg("flamegraph").args(args).arg("-o").arg(&svg));
        assert_eq!(o.code, 0, "{}", o.stderr);
        let (sub, titles) = subtitle_and_titles(&svg);
        (sub, hover_units(&titles), o.stderr)
    };
    // perf.data sampled cpu-clock: widths are its period in ns.
    let (sub, units, _) = draw(
        &[
            "--kallsyms",
            "tests/fixtures/perf-urandom.kallsyms",
            "tests/fixtures/perf-urandom.data",
        ],
        "perf.svg",
    );
    assert!(
        sub.contains("134 samples, 268,537,072 ns of cpu-clock"),
        "{sub}"
    );
    assert_eq!(units, BTreeSet::from(["ns".to_string()]), "{units:?}");
    // A capture's samples weigh one each.
    let (sub, units, _) = draw(&["tests/fixtures/oncpu-urandom.cap"], "cap.svg");
    assert!(sub.ends_with(" samples"), "{sub}");
    assert_eq!(units, BTreeSet::from(["samples".to_string()]), "{units:?}");
    // Blocked time in µs, subtitle and hover alike.
    let (sub, units, _) = draw(
        &["--off-cpu", "tests/fixtures/stacks-journal-4m.cap"],
        "off.svg",
    );
    assert!(
        sub.contains(" us (") && sub.ends_with("ms) blocked with a known stack"),
        "{sub}"
    );
    assert_eq!(units, BTreeSet::from(["us".to_string()]), "{units:?}");
}

/// A perf.data file from another kernel without --kallsyms: the graph's
/// first line says what is missing, and so does the first warning; with
/// the recording kernel's symbols in perf's build-id cache
/// (~/.debug/[kernel.kallsyms]/ID/kallsyms) the frames are named from
/// there, as perf report names them.
#[test]
fn perf_data_kernel_frames_come_from_the_build_id_cache_or_the_graph_says_what_is_missing() {
    const DATA: &str = "tests/fixtures/perf-urandom.data";
    const ID: &str = "4a5a9b0affb66c437abcd455d2738af879985fa9";
    // Another kernel taken for the running one, whichever this machine
    // runs (it may run the fixture's).
    const OTHER: &str = "0123456789abcdef0123456789abcdef01234567";
    let dir = tempdir();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let svg = dir.path().join("u.svg");
    let o = outcome_of(
        iosleuth()
            .env("HOME", &home)
            .env("IOSLEUTH_RUNNING_BUILD_ID", OTHER)
            .args(["flamegraph", DATA, "-o"])
            .arg(&svg),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let first = o.stderr.lines().next().unwrap_or("");
    assert!(
        first.contains("kernel frames unresolved")
            && first.contains(ID)
            && first.contains("--kallsyms"),
        "{}",
        o.stderr
    );
    let (sub, _) = subtitle_and_titles(&svg);
    assert!(
        sub.starts_with("kernel frames unresolved (100% of the samples): pass --kallsyms FILE"),
        "{sub}"
    );
    let html = {
        let out = dir.path().join("page.html");
        run(iosleuth()
            .env("HOME", &home)
            .env("IOSLEUTH_RUNNING_BUILD_ID", OTHER)
            .args(["report", DATA, "--format", "html", "-o"])
            .arg(&out));
        std::fs::read_to_string(&out).unwrap()
    };
    assert!(html.contains("<p class=\"note\">kernel frames unresolved"));

    let cache = home.join(".debug/[kernel.kallsyms]").join(ID);
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::copy(
        "tests/fixtures/perf-urandom.kallsyms",
        cache.join("kallsyms"),
    )
    .unwrap();
    let o = outcome_of(
        iosleuth()
            .env("HOME", &home)
            .env("IOSLEUTH_RUNNING_BUILD_ID", OTHER)
            .args(["flamegraph", DATA, "-o"])
            .arg(&svg),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stderr.contains("unresolved"), "{}", o.stderr);
    let (sub, titles) = subtitle_and_titles(&svg);
    assert!(!sub.contains("unresolved"), "{sub}");
    assert!(
        titles.iter().any(|t| t.starts_with("chacha_permute (")),
        "{titles:?}"
    );
}

/// Every fixture's page gives each device the request count the JSON
/// report gives (one number in every output), and a light capture's
/// latency plots say they draw its slow requests, not every request.
#[test]
fn the_page_counts_each_devices_requests_as_the_report_does() {
    for input in crate::golden::fixtures() {
        let name = input.to_str().unwrap();
        let json = json_report(&[&input], &[]);
        let html = page(&["report", name]);
        for d in json["devices"].as_array().into_iter().flatten() {
            let dev = d["device"].as_str().unwrap();
            let total: u64 = d["completed"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum();
            let head = format!("<h2>Device {dev}</h2><p class=\"sub\">{total} requests completed");
            assert!(html.contains(&head), "{name}: the page lacks {head:?}");
        }
    }
    let html = page(&["report", "tests/fixtures/light-slowdev.cap"]);
    assert!(html.contains("<h2>Device 7,0</h2><p class=\"sub\">1202 requests completed; the latency plots below draw only the 4 slow requests recorded"));
    let scatter: Vec<&str> = charts(&html)
        .into_iter()
        .filter(|c| c.contains(", the 4 slow requests recorded</text>"))
        .collect();
    assert_eq!(scatter.len(), 2, "the Q2C and the D2C plot");
    for c in scatter {
        assert_eq!(c.matches("<circle class=\"write\"").count(), 4);
        assert!(!c.contains("every request"));
    }
}

/// One clock: the page's "done at" of every request is the time `dump`
/// prints for a completion of that device, both in seconds from the
/// trace's start (the text report's clock).
#[test]
fn the_page_and_dump_print_one_clock() {
    let input = "tests/fixtures/slowdev-fsync.cap";
    let html = page(&["report", input]);
    let dump = run(iosleuth().args(["dump", input, "--events", "C"]));
    let completions: BTreeSet<String> = dump
        .lines()
        .filter(|l| l.contains("dev=7,0"))
        .map(|l| {
            let t: f64 = l.split_whitespace().next().unwrap().parse().unwrap();
            format!("{t:.6}")
        })
        .collect();
    let done: Vec<&str> = html
        .split("done at ")
        .skip(1)
        .map(|s| s.split(' ').next().unwrap())
        .collect();
    assert!(done.len() > 100, "{} points", done.len());
    for t in &done {
        assert!(
            completions.contains(*t),
            "done at {t} s: no completion at that time in dump"
        );
    }
    let text = run(iosleuth().args(["report", input]));
    assert!(
        text.contains(
            "times are seconds from the trace's start (14277.843213642 on the trace clock)"
        ),
        "{}",
        &text[..300]
    );
    let absolute =
        run(iosleuth().args(["dump", input, "--events", "C", "--absolute", "--limit", "1"]));
    assert!(
        absolute.trim_start().starts_with("14277.845706326"),
        "{absolute}"
    );
}
