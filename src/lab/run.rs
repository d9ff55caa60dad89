//! `lab run`: for each scenario, make its disks, record the good and the
//! bad run, diagnose both, compare them and judge whether it went as
//! expected; remove everything on the way out (also on Ctrl-C, and when
//! the reader of the output goes away).

use super::noise::{self, Noise};
use super::recording::Lab;
use super::scenarios::Scenario;
use crate::capture::workload::{install_signal_handlers, interrupted};
use crate::diagnose::{Finding, Severity};
use crate::error::{Error, ExitStatus, Result};
use crate::pipeline::{self, Options, Run};
use std::io::Write;
use std::path::Path;

/// Runs the scenarios; fails (1) when one did not go as expected, stops
/// with 130 when interrupted. One that did not go as expected on a machine
/// too noisy to tell is inconclusive: said, and not counted as failed.
pub fn run(
    chosen: &[&Scenario],
    keep: bool,
    light: bool,
    watch: bool,
    try_remedy: bool,
    out: &mut dyn Write,
) -> Result<ExitStatus> {
    install_signal_handlers();
    let exe = std::env::current_exe()
        .map_err(|e| Error::failed(format!("cannot find my own binary: {e}")))?;
    let work = super::WorkDir {
        path: std::path::PathBuf::from("/var/tmp").join(format!(
            "iosleuth-lab-run-{}",
            crate::capture::unique_name()
        )),
        keep,
    };
    let (mut failed, mut inconclusive) = (0, 0);
    let mut tried = Vec::new();
    for s in chosen {
        if interrupted() {
            break;
        }
        let lab = Lab {
            exe: exe.clone(),
            dir: work.path.join(s.name),
            stop: interrupted,
            keep,
            light,
            watch,
            try_remedy,
            expect: s.expect,
            first_device: super::loopdev::attached_count(),
            notes: Default::default(),
            standing: Default::default(),
        };
        if let Some(why) = (s.missing)() {
            writeln!(out, "lab {}: skipped: {why}\n", s.name)?;
            continue;
        }
        match scenario(s, &lab, out)? {
            Verdict::AsExpected => {}
            Verdict::Not => failed += 1,
            Verdict::Inconclusive => inconclusive += 1,
        }
        if try_remedy {
            let t = super::tried::tried(s.name, &lab);
            writeln!(
                out,
                "lab {} --try: {}: {}{}\n",
                s.name,
                t.verdict,
                t.remedy,
                if t.effect.is_empty() {
                    String::new()
                } else {
                    format!("; {}; finding in {}", t.effect, t.finding)
                }
            )?;
            tried.push(t);
        }
    }
    if try_remedy && tried.len() > 1 {
        writeln!(out, "{}", super::tried::table(&tried))?;
    }
    if inconclusive > 0 {
        writeln!(
            out,
            "{inconclusive} scenario(s) inconclusive: this machine was too noisy to tell (run them again when it is quieter)"
        )?;
    }
    if keep {
        writeln!(out, "captures kept in {}", work.path.display())?;
    }
    drop(work);
    if interrupted() {
        return Err(Error::Interrupted(
            "interrupted; everything the lab made is removed".into(),
        ));
    }
    Ok(if failed > 0 {
        ExitStatus(1)
    } else {
        ExitStatus::SUCCESS
    })
}

enum Verdict {
    AsExpected,
    Not,
    /// Not as expected, on a machine whose own noise could explain it.
    Inconclusive,
}

/// The machine's noise with nothing of ours running; none when it could
/// not be measured (said, and the scenario judged as usual).
fn machine_noise() -> Option<Noise> {
    noise::measure(noise::WINDOW)
        .inspect_err(|e| {
            eprintln!(
                "iosleuth: lab: cannot measure this machine's noise: {}",
                e.message()
            )
        })
        .ok()
}

/// One scenario, printed as it goes; how it went.
fn scenario(s: &Scenario, lab: &Lab, out: &mut dyn Write) -> Result<Verdict> {
    std::fs::create_dir_all(&lab.dir)
        .map_err(|e| Error::failed(format!("{}: {e}", lab.dir.display())))?;
    writeln!(
        out,
        "==================== lab {} ({}) ====================",
        s.name, s.case
    )?;
    writeln!(out, "{}; good: {}; bad: {}\n", s.about, s.good, s.bad)?;
    out.flush()?;
    let t = std::time::Instant::now();
    let before = machine_noise();
    if let Err(e) = s.record(lab) {
        eprintln!("iosleuth: lab {}: {}", s.name, e.message());
        return Ok(Verdict::Not);
    }
    // The lab's own runs: their warnings are noise here.
    let (Ok(good), Ok(bad)) = (diagnosed(&lab.good()), diagnosed(&lab.bad())) else {
        return Ok(Verdict::Not);
    };
    let ours = Ours::of(lab);
    findings(out, &format!("good ({})", s.good), &good, &ours)?;
    findings(out, &format!("bad ({})", s.bad), &bad, &ours)?;
    for note in lab.notes.borrow().iter() {
        writeln!(out, "{note}")?;
    }
    let d = crate::compare::diff(&good.analysis, &good.findings, &bad.analysis, &bad.findings);
    writeln!(
        out,
        "diff (good -> bad):\n{}",
        crate::report::diff_text::render(&d)
    )?;
    if lab.keep {
        flame_graphs(lab, &good, &bad, out)?;
    }
    let judged = |run: &Run| -> Vec<Finding> {
        run.findings
            .iter()
            .filter(|f| about_ours(f, &ours))
            .cloned()
            .collect()
    };
    let (good_judged, bad_judged) = (judged(&good), judged(&bad));
    let watched = if lab.watch {
        let (ok, said) = super::watched::verdict(s, lab);
        writeln!(out, "watch: {said}\n")?;
        ok
    } else {
        None
    };
    let as_expected = s.as_expected(&good_judged, &bad_judged, &d) && watched != Some(false);
    // Measured again after a miss: noise comes and goes.
    let noise = match (as_expected, before) {
        (false, Some(b)) => Some(machine_noise().map_or(b, |a| b.max(a))),
        _ => before,
    };
    let ram_stall = match as_expected {
        false => stall_of_a_disk_in_ram(s.expect, &good_judged, &ours.devices),
        true => None,
    };
    let within_noise = match (as_expected, noise) {
        (false, Some(n)) => slow_within_noise(&good_judged, n),
        _ => None,
    };
    let verdict = match noise {
        _ if as_expected => Verdict::AsExpected,
        Some(n) if n.too_noisy() => Verdict::Inconclusive,
        _ if ram_stall.is_some() || within_noise.is_some() => Verdict::Inconclusive,
        _ => Verdict::Not,
    };
    let said = match (&verdict, noise, ram_stall) {
        (Verdict::Inconclusive, _, None) if within_noise.is_some() => format!(
            "inconclusive: the good run's slowest operation took {:.2} ms, no more than twice what this machine's own noise adds",
            within_noise.unwrap_or_default()
        ),
        (Verdict::AsExpected, _, _) => "as expected".to_string(),
        (Verdict::Inconclusive, Some(n), _) if n.too_noisy() => {
            format!("inconclusive: {}", n.why_inconclusive())
        }
        (Verdict::Inconclusive, _, Some(ms)) => format!(
            "inconclusive: in the good run one request took {ms:.1} ms on a lab disk in RAM, which has no stalls of its own: its loop worker waited for a CPU on this busy machine"
        ),
        _ => "NOT as expected".to_string(),
    };
    writeln!(
        out,
        "lab {}: {said} ({:.1} s; machine noise: {}){}\n",
        s.name,
        t.elapsed().as_secs_f64(),
        noise.map_or("not measured".to_string(), |n| n.figures()),
        match s.expect {
            Some(id) if s.rivals.is_empty() =>
                format!("; expected the bad run's top finding to be {id}"),
            Some(id) => format!(
                "; expected the bad run's top finding to be {id}, and no {}",
                s.rivals.join(" or ")
            ),
            None => String::new(),
        }
    )?;
    if let (Verdict::Not | Verdict::Inconclusive, Some(id)) = (&verdict, s.expect) {
        why_silent(out, id, &bad)?;
        for f in bad_judged.iter().filter(|f| s.rivals.contains(&f.id)) {
            writeln!(out, "{} fired in the bad run: {}\n", f.id, f.title)?;
        }
    }
    out.flush()?;
    Ok(verdict)
}

/// After a miss: what the expected rule said of the bad run, so that a
/// miss can be told from a rule that fired below another one.
fn why_silent(out: &mut dyn Write, id: &str, bad: &Run) -> Result<()> {
    let Some(rule) = crate::diagnose::catalog().iter().find(|r| r.id == id) else {
        return Ok(());
    };
    match crate::diagnose::verdict(&bad.analysis, rule) {
        crate::diagnose::Verdict::Fired(f) => {
            writeln!(out, "{id} fired in the bad run, not first: {}\n", f.title)?
        }
        crate::diagnose::Verdict::NotFired(why) => {
            writeln!(out, "{id} stayed silent in the bad run: {why}\n")?
        }
    }
    Ok(())
}

/// Beside kept captures recorded with stacks: each run's off-CPU flame
/// graph and the differential one.
fn flame_graphs(lab: &Lab, good: &Run, bad: &Run, out: &mut dyn Write) -> Result<()> {
    use crate::report::flamegraph::{differential_off_cpu_svg, off_cpu_svg};
    let (g, b) = (&good.analysis, &bad.analysis);
    if g.stacks.off_cpu_ns == 0 || b.stacks.off_cpu_ns == 0 {
        return Ok(());
    }
    let svgs = [
        ("good-off-cpu.svg", off_cpu_svg(g, "good run")),
        ("bad-off-cpu.svg", off_cpu_svg(b, "bad run")),
        (
            "diff-off-cpu.svg",
            differential_off_cpu_svg(&[g], &[b], "red: blocked longer in the bad run"),
        ),
    ];
    for (name, svg) in svgs {
        let path = lab.dir.join(name);
        match svg.and_then(|bytes| std::fs::write(&path, bytes)) {
            Ok(()) => writeln!(out, "flame graph: {}", path.display())?,
            Err(e) => eprintln!("iosleuth: {}: {e}", path.display()),
        }
    }
    Ok(())
}

/// A lab run, analyzed; a failure is said, as the lab goes on.
fn diagnosed(path: &Path) -> Result<Run> {
    pipeline::diagnosed(path, &Options::default()).inspect_err(|e| {
        if !e.is_quiet() {
            eprintln!("iosleuth: {e}");
        }
    })
}

/// The device a finding is about (its evidence's `device`), if it names one.
fn device_of(f: &Finding) -> Option<&str> {
    f.evidence.get("device").and_then(|d| d.as_str())
}

/// What a scenario made: its devices (and whether each is in RAM), and
/// the processes it keeps beside its bad run.
pub(super) struct Ours {
    devices: Vec<(String, bool)>,
    standing: Vec<u32>,
}

impl Ours {
    /// What `lab`'s scenario made: the devices attached since it began.
    pub(super) fn of(lab: &Lab) -> Ours {
        Ours {
            devices: super::loopdev::attached_since(lab.first_device),
            standing: lab.standing.borrow().clone(),
        }
    }
}

/// Whether a finding is about the scenario: it names one of the devices
/// the scenario attached, or no device at all (a thread, the journal); and
/// for CPUs, held mostly by the recorded command's processes or by the
/// scenario's standing ones (not by other work on this machine, which
/// says nothing of the scenario).
pub(super) fn about_ours(f: &Finding, ours: &Ours) -> bool {
    let top_holder = f.evidence["held_by"][0]["pid"].as_u64();
    device_of(f).is_none_or(|d| ours.devices.iter().any(|(o, _)| o == d))
        && (f.evidence["held_outside_the_recorded_command_percent"]
            .as_f64()
            .is_none_or(|p| p < 50.0)
            || top_holder.is_some_and(|p| ours.standing.iter().any(|&s| u64::from(s) == p)))
}

/// The finding whose remedy the lab tries for a scenario that expects
/// none (a healthy one).
#[derive(Debug, PartialEq)]
pub(super) enum Own {
    Finding(&'static str),
    /// The bad run's findings are all about other work on the machine.
    OthersOnly,
    /// The bad run has none (`try` says so itself).
    NoFinding,
}

/// The first of `findings` about the scenario itself, one with a live
/// remedy first. Never one about other work on the machine (a CPU held
/// by a compiler beside it): its remedy names that work's processes,
/// which the lab leaves alone.
pub(super) fn own(findings: &[Finding], ours: &Ours) -> Own {
    let own: Vec<&Finding> = findings.iter().filter(|f| about_ours(f, ours)).collect();
    match own
        .iter()
        .find(|f| f.remedy.as_ref().is_some_and(|r| r.live))
        .or(own.first())
    {
        Some(f) => Own::Finding(f.id),
        None if findings.is_empty() => Own::NoFinding,
        None => Own::OthersOnly,
    }
}

/// A good run's device spike when every disk of the scenario is a file in
/// RAM and the scenario is not about spikes: the time was the loop
/// worker's wait for a CPU, not a device's. Its latency, ms.
fn stall_of_a_disk_in_ram(
    expect: Option<&str>,
    good: &[Finding],
    ours: &[(String, bool)],
) -> Option<f64> {
    const SPIKE: &str = "device_latency_spike";
    if expect == Some(SPIKE) || ours.is_empty() || !ours.iter().all(|(_, ram)| *ram) {
        return None;
    }
    good.iter()
        .find(|f| f.id == SPIKE && f.severity == Severity::Critical)
        .map(|f| f.evidence["latency_ns"].as_f64().unwrap_or(0.0) / 1e6)
}

/// A good run whose `unexplained` slow operations are no slower than
/// twice the machine's measured noise (a 1 ms sleep's late wake-up, a
/// 4 KiB direct I/O): they may be the machine's, not the scenario's. Their
/// slowest, ms.
fn slow_within_noise(good: &[Finding], n: super::noise::Noise) -> Option<f64> {
    let slowest = good
        .iter()
        .find(|f| f.id == crate::diagnose::UNEXPLAINED)?
        .evidence["slowest"]["latency_ms"]
        .as_f64()?;
    let noise_ms = n.wakeup_late.max(n.device).as_secs_f64() * 1e3;
    (slowest <= 2.0 * noise_ms).then_some(slowest)
}

fn findings(out: &mut dyn Write, label: &str, run: &Run, ours: &Ours) -> Result<()> {
    writeln!(out, "{label}:")?;
    if run.findings.is_empty() {
        writeln!(out, "  no findings")?;
    }
    for x in &run.findings {
        let mut one = String::new();
        crate::report::text::finding(&mut one, x);
        for l in one.lines() {
            writeln!(out, "  {l}")?;
        }
        if !about_ours(x, ours) {
            match device_of(x) {
                Some(d) => writeln!(out, "    (device {d} is not one of the lab's: not judged)")?,
                None => writeln!(
                    out,
                    "    (the CPUs were held by other work on this machine, not the scenario's: not judged)"
                )?,
            }
        }
    }
    // A light capture judges only some rules: which, for each run.
    if run.analysis.light.is_some() {
        let c = crate::diagnose::coverage(&run.analysis, &run.findings);
        writeln!(
            out,
            "  judged by this light capture: {} of {} rules ({}); not judged: {}",
            c.judged.len(),
            c.judged.len() + c.not_judged.len(),
            c.judged.join(", "),
            if c.not_judged.is_empty() {
                "none".to_string()
            } else {
                c.not_judged
                    .iter()
                    .map(|n| n.id)
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        )?;
    }
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(id: &'static str, evidence: serde_json::Value) -> Finding {
        Finding {
            remedy: None,
            id,
            severity: Severity::Critical,
            title: String::new(),
            evidence,
            explanation: String::new(),
            workaround: String::new(),
        }
    }

    #[test]
    fn only_findings_about_the_lab_s_devices_are_judged() {
        let ours = Ours {
            devices: vec![("7,0".to_string(), true)],
            standing: vec![4711],
        };
        let splitting = |d: &str| finding("request_splitting", serde_json::json!({ "device": d }));
        assert!(about_ours(&splitting("7,0"), &ours));
        // The machine's disk, busy with other work.
        assert!(!about_ours(&splitting("254,0"), &ours));
        // A stall of the machine's disk under a fault of the workload's
        // (its program's own library, read at start).
        let spike = finding(
            "device_latency_spike",
            serde_json::json!({ "device": "254,0", "operation": "fault file" }),
        );
        assert!(!about_ours(&spike, &ours));
        // About no device: a thread, the journal.
        assert!(about_ours(
            &finding("rt_starvation", serde_json::json!({})),
            &ours
        ));
        // A CPU held by other work on the machine, or by the scenario's
        // own busy loops beside its workload.
        let held = |pid: u32| {
            finding(
                "cpu_contention",
                serde_json::json!({
                    "held_by": [{"pid": pid}],
                    "held_outside_the_recorded_command_percent": 100.0,
                }),
            )
        };
        assert!(!about_ours(&held(99), &ours));
        assert!(about_ours(&held(4711), &ours));
    }

    /// A healthy scenario's `--try` takes a finding of its own, never the
    /// remedy of one about other work on the machine (CI once saw the lab
    /// try to renice a compiler that held the CPU, and fail: it had exited).
    #[test]
    fn a_healthy_scenario_tries_only_a_finding_of_its_own() {
        let ours = Ours {
            devices: vec![("7,0".to_string(), true)],
            standing: vec![],
        };
        let mut others = finding(
            "cpu_contention",
            serde_json::json!({
                "held_by": [{"pid": 9025}],
                "held_outside_the_recorded_command_percent": 100.0,
            }),
        );
        others.remedy = Some(crate::diagnose::remedy::Remedy {
            settings: Vec::new(),
            live: true,
            not_live: None,
            metric: None,
        });
        let unexplained = finding("unexplained", serde_json::json!({}));
        assert_eq!(own(&[], &ours), Own::NoFinding);
        assert_eq!(own(std::slice::from_ref(&others), &ours), Own::OthersOnly);
        assert_eq!(
            own(&[others.clone(), unexplained.clone()], &ours),
            Own::Finding("unexplained")
        );
        let mut live = finding("queue_depth", serde_json::json!({ "device": "7,0" }));
        live.remedy = others.remedy.clone();
        assert_eq!(
            own(&[others, unexplained, live], &ours),
            Own::Finding("queue_depth")
        );
    }

    #[test]
    fn a_spike_on_a_disk_in_ram_in_the_good_run_is_inconclusive() {
        let spike = finding(
            "device_latency_spike",
            serde_json::json!({ "latency_ns": 114_748_570u64 }),
        );
        let good = [spike];
        let ram = vec![("7,0".to_string(), true)];
        assert_eq!(
            stall_of_a_disk_in_ram(Some("journal_space_stall"), &good, &ram),
            Some(114.74857)
        );
        // Not when spikes are the point, or a disk is not in RAM.
        assert_eq!(
            stall_of_a_disk_in_ram(Some("device_latency_spike"), &good, &ram),
            None
        );
        let disk = vec![("7,0".to_string(), true), ("7,1".to_string(), false)];
        assert_eq!(stall_of_a_disk_in_ram(None, &good, &disk), None);
        assert_eq!(stall_of_a_disk_in_ram(None, &[], &ram), None);
    }

    /// The fuse-wait scenario's good run, recorded while a compiler ran:
    /// three writes of up to 5.43 ms (the FUSE server waited for a CPU),
    /// on a machine whose 1 ms sleeps woke 4.0 ms late and whose 4 KiB
    /// direct I/O took up to 5.3 ms.
    #[test]
    fn slow_operations_within_the_machines_noise_are_inconclusive() {
        use std::time::Duration;
        let good = [finding(
            crate::diagnose::UNEXPLAINED,
            serde_json::json!({ "slowest": { "latency_ms": 5.43 } }),
        )];
        let noise = |wakeup_us: u64, device_us: u64| super::super::noise::Noise {
            wakeup_late: Duration::from_micros(wakeup_us),
            device: Duration::from_micros(device_us),
            cpu_share: 1.0,
        };
        assert_eq!(slow_within_noise(&good, noise(4_000, 5_300)), Some(5.43));
        // A quiet machine: the good run's slow writes are the scenario's.
        assert_eq!(slow_within_noise(&good, noise(200, 900)), None);
        assert_eq!(slow_within_noise(&[], noise(4_000, 5_300)), None);
    }

    /// The queue scenario's bad run beside a compiler on both CPUs: sleeps
    /// woke 4.2 ms late, the disk answered within 5.4 ms, and a busy
    /// thread got half a CPU: too noisy to judge, and said why.
    #[test]
    fn a_machine_whose_cpus_are_held_by_others_is_too_noisy() {
        use std::time::Duration;
        let n = super::super::noise::Noise {
            wakeup_late: Duration::from_micros(4_200),
            device: Duration::from_micros(5_400),
            cpu_share: 0.5,
        };
        assert!(n.too_noisy());
        assert_eq!(
            n.why_inconclusive(),
            "a busy thread got 50 % of a CPU with nothing of ours running (other work held the CPUs)"
        );
        assert!(!super::super::noise::Noise {
            cpu_share: 0.97,
            ..n
        }
        .too_noisy());
    }
}
