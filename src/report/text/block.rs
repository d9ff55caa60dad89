//! Per device: the counts, btt's tables, latency percentiles, iostat -x
//! rows and histograms, laid out the way those tools lay them out.

use super::*;

/// One btt row: `%-15s %13.9f %13.9f %13.9f %11d`.
pub(super) fn btt_row(out: &mut String, name: &str, i: &Interval) {
    if i.n == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "{:<15} {:>13} {:>13.9} {:>13} {:>11}",
        name,
        secs(i.min_ns),
        i.avg_secs(),
        secs(i.max_ns),
        i.n
    );
}

pub(super) fn btt_table(out: &mut String, a: &Intervals) {
    let _ = writeln!(
        out,
        "{:>15} {:>13} {:>13} {:>13} {:>11}",
        "", "MIN", "AVG", "MAX", "N"
    );
    let _ = writeln!(
        out,
        "--------------- ------------- ------------- ------------- -----------"
    );
    for (name, i) in [
        ("Q2Qdm", &a.q2q_dm),
        ("Q2Adm", &a.q2a_dm),
        ("Q2Cdm", &a.q2c_dm),
        ("Q2Q", &a.q2q),
        ("Q2A", &a.q2a),
        ("Q2G", &a.q2g),
        ("S2G", &a.s2g),
        ("G2I", &a.g2i),
        ("Q2M", &a.q2m),
        ("I2D", &a.i2d),
        ("M2D", &a.m2d),
        ("D2C", &a.d2c),
        ("Q2C", &a.q2c),
    ] {
        btt_row(out, name, i);
    }
}

pub(super) fn pct_line(out: &mut String, name: &str, p: &Percentiles) {
    if p.count == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "  {:<4} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        name,
        p.count,
        us(p.avg as u64),
        us(p.p50),
        us(p.p90),
        us(p.p99),
        us(p.p999),
        us(p.max)
    );
}

pub(super) fn device(
    out: &mut String,
    d: &DeviceSummary,
    interval_s: f64,
    light: Option<&LightDeviceSummary>,
) {
    let _ = writeln!(
        out,
        "==================== Device {} ====================\n",
        Esc(&d.device)
    );
    let c = &d.completed;
    let b = &d.bytes_completed;
    let _ = writeln!(
        out,
        "requests completed: {} (read {}, write {}, discard {}, flush {}); {:.1} MiB read, {:.1} MiB written",
        c.total(),
        c.read,
        c.write,
        c.discard,
        c.flush,
        b.read as f64 / 1048576.0,
        b.write as f64 / 1048576.0
    );
    let a = &d.actions;
    if let Some(l) = light {
        // The kernel's counters; bios one by one were not recorded (only
        // the full recorder sees each), so their count is derived.
        let k = &l.counters;
        let (requests, _) = l.data_requests();
        let bios = (requests + l.merges()).saturating_sub(k.splits);
        let _ = writeln!(
            out,
            "bios queued not recorded (light capture; requests - splits + merges = {bios}), merged {} (back {}, front {}), requests merged {}, split {}, requeued {}, errors {}, {}; remapped and FUA not recorded\n",
            k.back_merges + k.front_merges,
            k.back_merges,
            k.front_merges,
            k.rq_merges,
            k.splits,
            k.requeues,
            k.errors,
            match l.throttled {
                Some((n, bytes)) => format!(
                    "held by cgroup I/O limits {n} ({:.1} MiB)",
                    bytes as f64 / 1048576.0
                ),
                None => "held by cgroup I/O limits not counted".into(),
            }
        );
        light_device(out, d, l);
        return;
    }
    let _ = writeln!(
        out,
        "bios queued {}, merged {} (back {}, front {}), requests merged {}, split {}, requeued {}, remapped {}, FUA {}, errors {}\n",
        a.queued,
        a.back_merged + a.front_merged,
        a.back_merged,
        a.front_merged,
        a.rq_merged,
        a.split,
        a.requeued,
        a.remapped,
        d.fua_requests,
        d.errors
    );
    let _ = writeln!(out, "btt intervals (seconds, per queued bio):");
    btt_table(out, &d.btt);
    if let Some(m) = &d.btt_merge {
        let _ = writeln!(
            out,
            "\n{:>10} | {:>8} {:>8} {:>7} | {:>8} {:>8} {:>8} {:>8}",
            "DEV", "#Q", "#D", "Ratio", "BLKmin", "BLKavg", "BLKmax", "Total"
        );
        let _ = writeln!(
            out,
            "{:>10} | {:>8} {:>8} {:>7.1} | {:>8} {:>8} {:>8} {:>8}",
            Esc(&d.device),
            m.queued,
            m.issued,
            m.ratio,
            m.blk_min,
            m.blk_avg,
            m.blk_max,
            m.blk_total
        );
    }
    if let Some(o) = &d.btt_overhead {
        let _ = writeln!(
            out,
            "\n{:>10} | {:>9} {:>9} {:>9} {:>9} {:>9}",
            "DEV", "Q2G", "G2I", "Q2M", "I2D", "D2C"
        );
        let _ = writeln!(
            out,
            "{:>10} | {:>8.4}% {:>8.4}% {:>8.4}% {:>8.4}% {:>8.4}%",
            Esc(&d.device),
            o.q2g_pct,
            o.g2i_pct,
            o.q2m_pct,
            o.i2d_pct,
            o.d2c_pct
        );
    }
    if d.d2c.count + d.q2c.count > 0 {
        request_latencies(out, d);
    }
    iostat_table(out, d, interval_s);
    histograms(out, d);
    out.push('\n');
}

/// Each request's D2C and Q2C. btt's table above counts queued bios, and a
/// flush queues none: with flushes, rows without them stand beside the
/// rows of all requests, so that btt's MAX and the requests' max agree or
/// say why not on the same screen.
fn request_latencies(out: &mut String, d: &DeviceSummary) {
    let flushes = d.completed.flush;
    if flushes == 0 {
        let _ = writeln!(out, "\nlatency per request (µs):");
    } else {
        let _ = writeln!(
            out,
            "\nlatency per request (µs; {flushes} of {} requests are flushes, which btt's table above does not count: they queue no bio; \"no flush\" rows leave them out):",
            d.completed.total()
        );
    }
    let w = if flushes == 0 { 4 } else { 12 };
    let _ = writeln!(
        out,
        "  {:<w$} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "", "count", "avg", "p50", "p90", "p99", "p99.9", "max"
    );
    pct_line(out, &format!("{:<w$}", "D2C"), &d.d2c);
    if flushes > 0 {
        pct_line(
            out,
            &format!("{:<w$}", "D2C no flush"),
            &d.d2c_without_flushes,
        );
    }
    pct_line(out, &format!("{:<w$}", "Q2C"), &d.q2c);
    if flushes > 0 {
        pct_line(
            out,
            &format!("{:<w$}", "Q2C no flush"),
            &d.q2c_without_flushes,
        );
    }
}

/// A light capture's device: each operation's stages from the kernel's
/// histograms, queue depth at issue, what could not be kept.
fn light_device(out: &mut String, d: &DeviceSummary, l: &LightDeviceSummary) {
    let _ = writeln!(
        out,
        "latency per request (µs; light capture: from the kernel's histograms, each value within 1/32):"
    );
    let _ = writeln!(
        out,
        "  {:<18} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "", "count", "avg", "p50", "p90", "p99", "p99.9", "max"
    );
    for o in &l.ops {
        for (stage, p) in [
            ("queued", &o.queued),
            ("device (D2C)", &o.device),
            ("total", &o.total),
        ] {
            pct_line(
                out,
                &format!("{:<18}", format!("{} {stage}", Esc(&o.op))),
                p,
            );
        }
    }
    let _ = writeln!(
        out,
        "  (queued: allocation -> issue; total: allocation -> completion)"
    );
    let p = &l.depth;
    let c = &l.counters;
    let ios: u64 = l.ops.iter().map(|o| o.ios).sum();
    if c.by_stamps > 0 {
        let _ = writeln!(
            out,
            "  ({} of {ios} requests measured from their own timestamps, the rest from per-request state)",
            c.by_stamps
        );
    }
    let sampled = match l.depth_sampled {
        0 | 1 => String::new(),
        n => format!(" (one request in {n}, sampled by hash)"),
    };
    if p.count == 0 {
        let _ = writeln!(out, "\nqueue depth at issue{sampled}: none read");
    } else {
        let _ = writeln!(
            out,
            "\nqueue depth at issue{sampled}: avg {:.1}, p50 {}, p99 {}, max {}",
            p.avg, p.p50, p.p99, p.max
        );
    }
    let _ = writeln!(
        out,
        "slow requests: {} recorded, {} over the cap (counted only), {} lost (ring buffer full); {} completions without a tracked issue (issued before recording), {} not tracked (request map full)",
        c.slow_sent, c.slow_capped, c.ring_full, c.no_state, c.state_full
    );
    histograms(out, d);
    out.push('\n');
}

/// iostat -x's columns per interval, then for the whole report.
fn iostat_table(out: &mut String, d: &DeviceSummary, interval_s: f64) {
    let _ = writeln!(
        out,
        "\niostat -x, {interval_s} s intervals (time from the start of the report):"
    );
    let _ = writeln!(
        out,
        "{:>8} {:>9} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>9} {:>6}",
        "time",
        "r/s",
        "w/s",
        "rkB/s",
        "wkB/s",
        "rrqm/s",
        "wrqm/s",
        "r_await",
        "w_await",
        "aqu-sz",
        "rareq-sz",
        "wareq-sz",
        "%util"
    );
    let row = |out: &mut String, label: String, r: &crate::analyze::block::iostat::IostatRow| {
        let _ = writeln!(
            out,
            "{:>8} {:>9.2} {:>9.2} {:>10.2} {:>10.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7.2} {:>9.2} {:>9.2} {:>6.2}",
            label, r.r_s, r.w_s, r.rkb_s, r.wkb_s, r.rrqm_s, r.wrqm_s, r.r_await, r.w_await, r.aqu_sz, r.rareq_sz, r.wareq_sz, r.util
        );
    };
    const MAX_ROWS: usize = 30;
    for r in d.iostat.iter().take(MAX_ROWS) {
        row(out, format!("{:.1}", r.start_s), r);
    }
    if d.iostat.len() > MAX_ROWS {
        let _ = writeln!(
            out,
            "{:>8} ({} more intervals in --format json)",
            "...",
            d.iostat.len() - MAX_ROWS
        );
    }
    row(out, "all".into(), &d.iostat_total);
}

/// Log2 histograms of latency and size, as bcc prints them.
fn histograms(out: &mut String, d: &DeviceSummary) {
    if d.d2c_hist_us.total() > 0 {
        let _ = writeln!(out, "\nD2C per request:");
        out.push_str(&d.d2c_hist_us.render("usecs"));
    }
    if d.q2c_hist_us.total() > 0 {
        let _ = writeln!(out, "\nQ2C per request:");
        out.push_str(&d.q2c_hist_us.render("usecs"));
    }
    if d.request_size_hist_kib.total() > 0 {
        let _ = writeln!(out, "\nissued request sizes:");
        out.push_str(&d.request_size_hist_kib.render("KiB"));
    }
}
