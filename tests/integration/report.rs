//! `arl report` on the committed main-job run (`results/sum-smollm2`), on a run in progress
//! with a resumed step, on two runs overlaid, and — where a headless Chromium is installed —
//! as a browser draws it.

use std::path::{Path, PathBuf};

use arl::report::{browser, build, load_runs};
use arl_tests::arl;
use serde_json::Value;

fn main_job() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/sum-smollm2")
}

fn results() -> Value {
    serde_json::from_str(&std::fs::read_to_string(main_job().join("results.json")).unwrap()).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arl-report-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The numbers of a polyline's `points` attribute, as (x, y) pairs.
fn polyline_points(svg: &str) -> usize {
    svg.split("<polyline fill=\"none\" stroke=\"#4e79a7\"")
        .skip(1)
        .map(|p| {
            let attr = p.split("points=\"").nth(1).unwrap();
            attr[..attr.find('"').unwrap()].split_whitespace().count()
        })
        .sum::<usize>()
        + svg.matches("<circle cx").count()
}

fn ci(v: &Value, key: &str) -> String {
    format!("{:.3} [{:.3}, {:.3}]", v[key].as_f64().unwrap(), v["ci"]["lo"].as_f64().unwrap(), v["ci"]["hi"].as_f64().unwrap())
}

#[test]
fn the_report_of_the_main_job_holds_its_curves_evaluation_and_transcripts() {
    let dir = scratch("main");
    let html_path = dir.join("report.html");
    let out =
        arl(&["report", main_job().to_str().unwrap(), "--out", html_path.to_str().unwrap(), "--svg", dir.join("svg").to_str().unwrap()])
            .unwrap();
    let html = std::fs::read_to_string(&html_path).unwrap();
    let r = results();
    // The evaluation as results.json has it.
    for expected in [ci(&r["before"]["summary"], "pass_at_1"), ci(&r["after"]["summary"], "pass_at_1"), ci(&r["difference"], "mean")] {
        assert!(html.contains(&expected), "missing {expected}");
    }
    // Every step of the reward curve is drawn.
    let steps = r["steps"].as_array().unwrap().len();
    let reward = std::fs::read_to_string(dir.join("svg/curve-reward_mean.svg")).unwrap();
    assert_eq!(polyline_points(&reward), steps);
    // A curve with gaps (no ratio on a step without gradient) draws exactly the steps it has.
    let with_ratio = r["steps"].as_array().unwrap().iter().filter(|s| s["ratio_mean"].is_number()).count();
    let ratio = std::fs::read_to_string(dir.join("svg/curve-ratio_mean.svg")).unwrap();
    assert_eq!(polyline_points(&ratio), with_ratio);
    assert!(with_ratio < steps, "the committed run has steps without gradient");
    // Every saved transcript, each turn marked by role.
    let transcripts = r["before"]["transcripts"].as_array().unwrap().len() + r["after"]["transcripts"].as_array().unwrap().len();
    assert!(out.contains(&format!("{transcripts} transcripts")), "{out}");
    assert_eq!(html.matches("<div class=\"ep\">").count(), transcripts);
    assert_eq!(html.matches("<div class=\"turn assistant\">").count(), transcripts);
    // One row per held-out task in the per-task chart.
    let tasks = r["before"]["per_task"].as_array().unwrap();
    let per_task = std::fs::read_to_string(dir.join("svg/per-task-1.svg")).unwrap();
    for t in tasks {
        assert!(per_task.contains(&format!(">{}</text>", t["task_id"].as_str().unwrap())));
    }
    // Self-contained: nothing to fetch.
    for outside in ["<script", "<link", "src=", "url(", "https://"] {
        assert!(!html.contains(outside), "the page refers to something outside it: {outside}");
    }
    assert_eq!(html.matches("http://").count(), html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_in_progress_with_a_resumed_step_shows_what_it_has() {
    let dir = scratch("progress");
    let job = main_job();
    let lines: Vec<String> = std::fs::read_to_string(job.join("metrics.jsonl")).unwrap().lines().map(str::to_string).collect();
    // Steps 1–6, step 5 logged twice (the second time with another reward), then a torn line.
    let mut again: Value = serde_json::from_str(&lines[4]).unwrap();
    again["reward_mean"] = 0.123_456.into();
    let mut text: String = lines[..6].iter().map(|l| format!("{l}\n")).collect();
    text.insert_str(text.match_indices('\n').nth(4).unwrap().0 + 1, &format!("{again}\n"));
    text.push_str(&lines[6][..40]);
    std::fs::write(dir.join("metrics.jsonl"), text).unwrap();
    std::fs::copy(job.join("config.toml"), dir.join("config.toml")).unwrap();
    // The before-evaluation lives in the newest checkpoint until results.json exists.
    let ckpt = dir.join("checkpoints/step-00006");
    std::fs::create_dir_all(&ckpt).unwrap();
    let r = results();
    std::fs::write(ckpt.join("trainer_state.json"), serde_json::json!({"step": 6, "before": r["before"]}).to_string()).unwrap();

    let runs = load_runs(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(runs[0].steps.len(), 6);
    assert_eq!(runs[0].steps[4]["reward_mean"].as_f64(), Some(0.123_456), "the last line of a repeated step wins");
    let page = build(&runs);
    assert!(page.html.contains(&ci(&r["before"]["summary"], "pass_at_1")), "before-eval from the checkpoint");
    assert!(page.html.contains("no results.json yet"));
    assert!(page.html.contains("logged twice"));
    assert!(page.html.contains("skipped 1 unreadable line"));
    assert!(page.html.contains("6 of 30"));
    let reward = page.figures.iter().find(|f| f.name == "curve-reward_mean").unwrap();
    assert_eq!(polyline_points(&reward.svg), 6);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_runs_are_overlaid_and_labelled_by_their_config_difference() {
    let dir = scratch("two");
    let other = dir.join("cispo");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(main_job().join("metrics.jsonl"), other.join("metrics.jsonl")).unwrap();
    let config = std::fs::read_to_string(main_job().join("config.toml")).unwrap();
    let mut table: toml::Table = config.parse().unwrap();
    table["loss"]["name"] = toml::Value::String("cispo".into());
    std::fs::write(other.join("config.toml"), toml::to_string(&table).unwrap()).unwrap();
    let html_path = dir.join("both.html");
    arl(&["report", main_job().to_str().unwrap(), other.to_str().unwrap(), "--out", html_path.to_str().unwrap()]).unwrap();
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("loss.name=grpo") && html.contains("loss.name=cispo"), "labels from the config difference");
    let reward = html.split("<svg").find(|s| s.contains("<title>reward (mean")).unwrap();
    assert!(reward.contains("stroke=\"#4e79a7\"") && reward.contains("stroke=\"#f28e2b\""), "both runs on one chart");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_refuses_what_is_not_a_run() {
    let dir = scratch("bad");
    let err = arl(&["report", dir.to_str().unwrap()]).unwrap_err();
    assert!(err.contains("not a run folder") && err.contains("--out folder of an `arl run`"), "{err}");
    let err = arl(&["report", "/no/such/run"]).unwrap_err();
    assert!(err.contains("/no/such/run: no such directory"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The share of a PNG's pixels that are not white (8-bit RGB or RGBA, as Chromium writes them),
/// decoded by the `png` crate.
fn inked_fraction(bytes: &[u8]) -> f64 {
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    assert_eq!(frame.bit_depth, png::BitDepth::Eight, "8-bit samples");
    let channels = match frame.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("colour type {other:?}"),
    };
    let inked = pixels[..frame.buffer_size()].chunks(channels).filter(|px| px[..3].iter().any(|&v| v < 250)).count();
    inked as f64 / (frame.width as usize * frame.height as usize) as f64
}

/// Where Debian's `chromium` is installed: the page loads without a console message and is not
/// blank (some of its pixels are not white; none of a blank page's are). A page with a script error
/// shows that the console check can fail.
#[test]
fn a_browser_draws_the_report_without_errors() {
    let Some(chromium) = browser::chromium() else {
        arl_core::testing::skip("no headless Chromium (apt install chromium, or set ARL_CHROMIUM)");
        return;
    };
    let dir = scratch("browser");
    let html = dir.join("report.html");
    arl(&["report", main_job().to_str().unwrap(), "--out", html.to_str().unwrap()]).unwrap();
    let console = browser::screenshot(&chromium, &html, &dir.join("report.png"), 1400, 3000).unwrap();
    assert!(console.is_empty(), "console messages: {console:?}");
    std::fs::write(dir.join("blank.html"), "<!DOCTYPE html><html><body></body></html>").unwrap();
    browser::screenshot(&chromium, &dir.join("blank.html"), &dir.join("blank.png"), 1400, 3000).unwrap();
    let inked = |p: &str| inked_fraction(&std::fs::read(dir.join(p)).unwrap());
    eprintln!("inked: report {:.4}, blank {:.4}", inked("report.png"), inked("blank.png"));
    assert!(inked("blank.png") == 0.0, "a blank page has no ink: {}", inked("blank.png"));
    assert!(inked("report.png") > 0.02, "the report is drawn: {} of its pixels are not white", inked("report.png"));
    std::fs::write(dir.join("bad.html"), "<html><body><script>undefinedFunction();</script></body></html>").unwrap();
    let console = browser::screenshot(&chromium, &dir.join("bad.html"), &dir.join("bad.png"), 400, 300).unwrap();
    assert!(console.iter().any(|l| l.contains("undefinedFunction")), "{console:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn results_compare_pairs_two_evaluations_by_task() {
    let dir = arl_tests::scratch_dir("results-compare");
    let eval = |name: &str, split: &str, correct: &[(&str, u32)]| {
        let per_task: Vec<serde_json::Value> =
            correct.iter().map(|(id, c)| serde_json::json!({"task_id": id, "family": "f", "n": 4, "correct": c})).collect();
        let path = dir.join(name);
        std::fs::write(&path, serde_json::json!({"split": split, "per_task": per_task}).to_string()).unwrap();
        path.display().to_string()
    };
    // Listed in another order after: tasks pair by id. Per-task differences 0.5, 0.25, 0.
    let before = eval("before.json", "heldout_instances", &[("a", 0), ("b", 2), ("c", 4)]);
    let after = eval("after.json", "heldout_instances", &[("c", 4), ("a", 2), ("b", 3)]);
    let line = arl_tests::arl(&["results", "compare", &before, &after]).unwrap();
    assert!(line.contains(": +0.250  95% CI [") && line.ends_with("(3 tasks)\n"), "{line}");
    let d: serde_json::Value = serde_json::from_str(&arl_tests::arl(&["results", "compare", &before, &after, "--json"]).unwrap()).unwrap();
    assert_eq!((d["mean"].as_f64(), d["tasks"].as_u64()), (Some(0.25), Some(3)), "{d}");
    assert!(d["ci"]["lo"].as_f64().unwrap() >= 0.0 && d["ci"]["hi"].as_f64().unwrap() <= 0.5, "{d}");
    // Other tasks, another split, not an evaluation: one line each, exit status 2.
    let other = eval("other.json", "heldout_instances", &[("a", 1), ("b", 1)]);
    let templates = eval("templates.json", "heldout", &[("a", 0), ("b", 2), ("c", 4)]);
    for (file, expected) in [
        (&other, "hold other tasks"),
        (&templates, "compare evaluations of one split"),
        (&"/etc/hostname".to_string(), "not an `arl eval` output"),
    ] {
        let (status, err) = arl_tests::arl_status(&["results", "compare", &before, file]);
        let err = err.unwrap_err();
        assert!(status == 2 && err.contains(expected) && err.lines().count() == 1, "{status} {err}");
    }
}
