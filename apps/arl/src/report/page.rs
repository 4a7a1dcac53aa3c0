//! The report page: its sections, each from the run data, and the figures it holds.

use std::fmt::Write;

use serde_json::Value;

use super::load::{HELDOUT_SPLITS, RunData};
use super::svg::{Interval, PALETTE, Series, escape, interval_chart, line_chart};
use super::transcript;

/// The per-step curves, in page order: metric key and title. Keys no run logged are left out;
/// numeric keys not listed here follow under their own names.
const CURVES: &[(&str, &str)] = &[
    ("reward_mean", "reward (mean over the step's episodes)"),
    ("pass_rate", "pass rate"),
    ("entropy", "entropy (nats per policy token)"),
    ("ref_kl", "KL to the reference (k3)"),
    ("kl_reward_mean", "KL penalty in the reward"),
    ("loss", "loss"),
    ("grad_norm", "gradient norm (before clipping)"),
    ("ratio_mean", "importance ratio (mean)"),
    ("clip_frac_low", "clip fraction, low side"),
    ("clip_frac_high", "clip fraction, high side"),
    ("logprob_gap_mean", "sampler–trainer gap (mean |Δ log-prob|)"),
    ("logprob_gap_max", "sampler–trainer gap (max |Δ log-prob|)"),
    ("zero_variance_groups", "groups with equal rewards (fraction)"),
    ("identical_nonzero_groups", "groups with equal non-zero rewards (fraction)"),
    ("prompts_over_budget", "episodes dropped for prompt length"),
    ("response_tokens_mean", "response tokens per episode (mean)"),
    ("truncated_frac", "episodes cut by a budget (fraction)"),
    ("malformed_call_rate", "malformed tool calls (rate)"),
    ("failed_call_rate", "failed tool calls (rate)"),
    ("lr", "learning rate"),
    ("generate_tokens_per_s", "generation throughput (tokens/s)"),
    ("update_tokens_per_s", "update throughput (tokens/s)"),
    ("rollout_seconds", "rollout time per step (s)"),
    ("generate_seconds", "of the rollout: sampling (s)"),
    ("env_seconds", "of the rollout: env, tools and grading (s)"),
    ("update_seconds", "update time per step (s)"),
    ("scoring_seconds", "of the update: no-grad scoring pass (s)"),
    ("checkpoint_seconds", "checkpoint after the step (s)"),
    ("publish_seconds", "weights handed to the samplers (s)"),
    ("step_seconds", "step time (s)"),
    ("infra_failed", "episodes lost to infrastructure failures"),
    ("peak_rss_mb", "peak memory (RSS, MB)"),
];

/// Keys that are counters or bookkeeping, not curves.
const NOT_CURVES: &[&str] = &["step", "episodes", "sampling_attempts", "policy_tokens", "non_finite_updates", "masked_truncated"];

/// A figure on the page, also written alone by `--svg`/`--png`.
pub struct Figure {
    pub name: String,
    pub svg: String,
}

/// The page and its figures.
pub struct Report {
    pub html: String,
    pub figures: Vec<Figure>,
    pub transcripts: usize,
}

/// Build the report of `runs` (already loaded and labelled).
pub fn build(runs: &[RunData]) -> Report {
    let mut figures = Vec::new();
    let mut body = String::new();
    let title = if runs.len() == 1 { format!("arl report: {}", runs[0].name()) } else { format!("arl report: {} runs", runs.len()) };
    let _ = write!(body, "<h1>{}</h1>", escape(&title));
    body.push_str(&runs_table(runs));
    body.push_str(&evaluation(runs, &mut figures));
    body.push_str(&curves(runs, &mut figures));
    body.push_str(&per_task(runs, &mut figures));
    body.push_str(&tools(runs));
    let (t, transcripts) = transcripts(runs);
    body.push_str(&t);
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{}</style></head><body>{body}</body></html>\n",
        escape(&title),
        STYLE
    );
    Report { html, figures, transcripts }
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1400px}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#f4f4f4}.grid{display:flex;flex-wrap:wrap;gap:10px}.fig{border:1px solid #eee}\
.note{color:#8a5a00;font-size:13px}.pair{display:grid;grid-template-columns:1fr 1fr;gap:10px}\
.ep{border:1px solid #ddd;margin:6px 0;padding:4px 8px;font-size:12px}.ep h4{margin:2px 0;font-size:13px}\
.turn{margin:4px 0;padding:2px 6px;border-left:4px solid #bbb}.turn.system{border-color:#999;background:#fafafa}\
.turn.user{border-color:#4e79a7}.turn.assistant{border-color:#59a14f}.turn.tool{border-color:#f28e2b}\
.role{font-weight:600;font-size:11px;text-transform:uppercase;color:#555}.cut{color:#e15759;text-transform:none}\
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font-size:12px}.call{background:#eef6ee;padding:2px 4px}\
.obs{background:#fdf3e7;padding:2px 4px}.tag{font-size:10px;font-weight:700;color:#666}.ok{color:#2a7d2a}.bad{color:#b22}";

fn color(i: usize) -> String {
    PALETTE[i % PALETTE.len()].to_string()
}

fn num(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
}

fn f3(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "–".into())
}

/// `0.078 [0.000, 0.172]` from a summary with `pass_at_1` (or `mean`) and `ci`.
fn with_ci(v: &Value, key: &str) -> String {
    let ci = v.get("ci");
    format!("{} [{}, {}]", f3(num(v.get(key))), f3(ci.and_then(|c| num(c.get("lo")))), f3(ci.and_then(|c| num(c.get("hi")))))
}

fn runs_table(runs: &[RunData]) -> String {
    let mut s = String::from(
        "<h2>Runs</h2><table><tr><th>label</th><th>folder</th><th>env</th><th>model</th><th>loss</th><th>steps</th><th>wall</th><th>commit</th></tr>",
    );
    for (i, r) in runs.iter().enumerate() {
        let c = |k: &str| r.config.get(k).cloned().unwrap_or_else(|| "–".into());
        let total = c("trainer.steps");
        let wall = r
            .results
            .as_ref()
            .and_then(|x| num(x.get("wall_seconds")))
            .map(|w| format!("{:.0} min {:02.0} s", (w / 60.0).floor(), w % 60.0));
        let meta = r.results.as_ref().and_then(|x| x.get("meta"));
        // The short commit, and `-dirty` when the build had uncommitted changes (apps/arl/build.rs).
        let commit = meta.and_then(|m| m.get("git_commit")).and_then(Value::as_str).map(|c| {
            let short: String = c.chars().take(10).collect();
            if c.ends_with("-dirty") { short + "-dirty" } else { short }
        });
        let model = meta.and_then(|m| m.get("model_dir")).and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| c("model.source"));
        let _ = write!(
            s,
            "<tr><td><span style=\"color:{}\">■</span> {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} of {}</td><td>{}</td><td>{}</td></tr>",
            color(i),
            escape(&r.label),
            escape(&r.dir.display().to_string()),
            escape(&c("env.name")),
            escape(&model),
            escape(&c("loss.name")),
            r.steps.len(),
            escape(&total),
            wall.unwrap_or_else(|| "–".into()),
            escape(&commit.unwrap_or_else(|| "–".into()))
        );
    }
    s.push_str("</table>");
    for r in runs {
        for n in &r.notes {
            let _ = write!(s, "<p class=\"note\">{}: {}</p>", escape(&r.label), escape(n));
        }
    }
    s
}

/// The splits any of `runs` has, in order (`heldout` always).
fn splits(runs: &[RunData]) -> Vec<&'static str> {
    HELDOUT_SPLITS
        .into_iter()
        .filter(|&sp| sp == HELDOUT_SPLITS[0] || runs.iter().any(|r| r.split(sp).iter().any(Option::is_some)))
        .collect()
}

fn evaluation(runs: &[RunData], figures: &mut Vec<Figure>) -> String {
    let mut s = String::from(
        "<h2>Held-out evaluation</h2><table><tr><th>run</th><th>split</th><th>before: pass@1 [95% CI]</th><th>after</th><th>after − before (paired)</th><th>p</th><th>tasks</th></tr>",
    );
    let (mut rows, mut diffs) = (Vec::new(), Vec::new());
    let splits = splits(runs);
    for (i, r) in runs.iter().enumerate() {
        for &split in &splits {
            let [before, after, diff] = r.split(split);
            let before = before.and_then(|b| b.get("summary"));
            let after = after.and_then(|a| a.get("summary"));
            if before.is_none() && after.is_none() && diff.is_none() {
                continue;
            }
            // One split: rows by run; two: by run and split.
            let label = if splits.len() > 1 { format!("{} · {split}", r.label) } else { r.label.clone() };
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{split}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&r.label),
                before.map(|b| with_ci(b, "pass_at_1")).unwrap_or_else(|| "–".into()),
                after.map(|a| with_ci(a, "pass_at_1")).unwrap_or_else(|| "–".into()),
                diff.map(|d| with_ci(d, "mean")).unwrap_or_else(|| "–".into()),
                f3(diff.and_then(|d| num(d.get("p_value")))),
                before.or(after).and_then(|x| x.get("tasks")).map(Value::to_string).unwrap_or_else(|| "–".into())
            );
            let iv = |v: &Value, key: &str, c: &str| -> Option<Interval> {
                let ci = v.get("ci")?;
                Some(Interval { value: num(v.get(key))?, lo: num(ci.get("lo"))?, hi: num(ci.get("hi"))?, color: c.to_string() })
            };
            let ivs: Vec<Interval> =
                [before.and_then(|b| iv(b, "pass_at_1", "#999999")), after.and_then(|a| iv(a, "pass_at_1", &color(i)))]
                    .into_iter()
                    .flatten()
                    .collect();
            if !ivs.is_empty() {
                rows.push((label.clone(), ivs));
            }
            if let Some(d) = diff.and_then(|d| iv(d, "mean", &color(i))) {
                diffs.push((label, vec![d]));
            }
        }
    }
    s.push_str("</table><p>Intervals: the task-level bootstrap of <code>results.json</code>.");
    if splits.len() > 1 {
        s.push_str(
            " <code>heldout</code>: tasks of kinds training never saw (the coding gyms: other bug templates); \
             <code>heldout_instances</code>: the training kinds under names and orders never trained on.",
        );
    }
    s.push_str("</p><div class=\"grid\">");
    if !rows.is_empty() {
        let svg =
            interval_chart("held-out pass@1, before (grey) and after", &rows, 0.0, 1.0, &[("before", "#999999"), ("after", &color(0))]);
        s.push_str(&svg);
        figures.push(Figure { name: "eval-pass-at-1".into(), svg });
    }
    if !diffs.is_empty() {
        let svg = interval_chart("paired difference, after − before", &diffs, -1.0, 1.0, &[]);
        s.push_str(&svg);
        figures.push(Figure { name: "eval-difference".into(), svg });
    }
    s.push_str("</div>");
    s
}

fn curves(runs: &[RunData], figures: &mut Vec<Figure>) -> String {
    let mut keys: Vec<(String, String)> = CURVES.iter().map(|(k, t)| (k.to_string(), t.to_string())).collect();
    let mut extra = std::collections::BTreeSet::new();
    for r in runs {
        for st in &r.steps {
            if let Some(obj) = st.as_object() {
                for (k, v) in obj {
                    if v.is_number() && !NOT_CURVES.contains(&k.as_str()) && !CURVES.iter().any(|(c, _)| c == k) {
                        extra.insert(k.clone());
                    }
                }
            }
        }
    }
    keys.extend(extra.into_iter().map(|k| (k.clone(), k)));
    // A weighted reward's components (`rewards` in metrics.jsonl): one curve each, after the
    // pass rate, keyed `rewards.<name>`.
    let components: std::collections::BTreeSet<String> = runs
        .iter()
        .flat_map(|r| r.steps.iter().filter_map(|st| st.get("rewards")?.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>())))
        .flatten()
        .collect();
    let at = keys.iter().position(|(k, _)| k == "pass_rate").map_or(keys.len(), |i| i + 1);
    keys.splice(
        at..at,
        components.into_iter().map(|c| (format!("rewards.{c}"), format!("reward component {c} (mean score, before its weight)"))),
    );
    let mut s = String::from("<h2>Training curves</h2>");
    if runs.iter().all(|r| r.steps.is_empty()) {
        s.push_str("<p class=\"note\">No step has been logged yet.</p>");
        return s;
    }
    s.push_str("<div class=\"grid\">");
    let mut zero = Vec::new();
    for (key, title) in keys {
        let series: Vec<Series> = runs
            .iter()
            .enumerate()
            .map(|(i, r)| Series {
                label: r.label.clone(),
                color: color(i),
                points: r.steps.iter().filter_map(|st| Some((num(st.get("step"))?, num(step_value(st, &key))))).collect(),
            })
            .collect();
        let values = || series.iter().flat_map(|x| x.points.iter().filter_map(|p| p.1));
        if values().next().is_none() {
            continue;
        }
        if values().all(|v| v == 0.0) {
            zero.push(key);
            continue;
        }
        let svg = line_chart(&title, &series);
        s.push_str(&svg);
        figures.push(Figure { name: format!("curve-{key}"), svg });
    }
    s.push_str("</div>");
    if !zero.is_empty() {
        let _ = write!(s, "<p>0 at every step (not drawn): {}.</p>", escape(&zero.join(", ")));
    }
    s
}

/// A step's value of `key`; `rewards.<name>` is a weighted reward's component.
fn step_value<'a>(step: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    match key.strip_prefix("rewards.") {
        Some(name) => step.get("rewards")?.get(name),
        None => step.get(key),
    }
}

/// Wilson's 95% interval of `k` successes in `n`.
fn wilson(k: f64, n: f64) -> (f64, f64) {
    if n <= 0.0 {
        return (0.0, 1.0);
    }
    let z = 1.959_963_984_540_054_f64;
    let p = k / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

fn per_task(runs: &[RunData], figures: &mut Vec<Figure>) -> String {
    let mut s = String::from("<h2>Per task, before and after</h2>");
    let mut any = false;
    let splits = splits(runs);
    for (i, r) in runs.iter().enumerate() {
        for &split in &splits {
            let [split_before, split_after, _] = r.split(split);
            let tasks = |e: Option<&Value>| -> Vec<(String, f64, f64)> {
                e.and_then(|e| e.get("per_task"))
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|t| Some((t.get("task_id")?.as_str()?.to_string(), num(t.get("correct"))?, num(t.get("n"))?)))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let (before, after) = (tasks(split_before), tasks(split_after));
            let mut ids: Vec<String> = before.iter().chain(&after).map(|t| t.0.clone()).collect();
            ids.sort();
            ids.dedup();
            if ids.is_empty() {
                continue;
            }
            any = true;
            let point = |list: &[(String, f64, f64)], id: &str, c: &str| {
                list.iter().find(|t| t.0 == id).map(|&(_, k, n)| {
                    let (lo, hi) = wilson(k, n);
                    Interval { value: k / n.max(1.0), lo, hi, color: c.to_string() }
                })
            };
            let rows: Vec<(String, Vec<Interval>)> = ids
                .iter()
                .map(|id| (id.clone(), [point(&before, id, "#999999"), point(&after, id, &color(i))].into_iter().flatten().collect()))
                .collect();
            let title = if split == HELDOUT_SPLITS[0] {
                format!("{}: pass rate per held-out task", r.label)
            } else {
                format!("{}: pass rate per held-out task, {split}", r.label)
            };
            let svg = interval_chart(&title, &rows, 0.0, 1.0, &[("before", "#999999"), ("after", &color(i))]);
            s.push_str(&svg);
            let name = if split == HELDOUT_SPLITS[0] { format!("per-task-{}", i + 1) } else { format!("per-task-{}-{split}", i + 1) };
            figures.push(Figure { name, svg });
        }
    }
    if any {
        s.push_str("<p>Per task: the share of its samples that passed, with Wilson's 95% interval over those samples.</p>");
    } else {
        s.push_str("<p class=\"note\">No per-task evaluation in these runs.</p>");
    }
    s
}

fn tools(runs: &[RunData]) -> String {
    const KEYS: [&str; 5] = ["turns", "tool_calls", "malformed_calls", "failed_calls", "truncated_episodes"];
    let mut s = String::from("<h2>Tool calls</h2><table><tr><th>run</th><th>when</th>");
    for k in KEYS {
        let _ = write!(s, "<th>{}</th>", k.replace('_', " "));
    }
    s.push_str("<th>other counters</th></tr>");
    for r in runs {
        let parts = [
            ("eval before", r.before.as_ref().and_then(|b| b.get("tool_stats"))),
            ("training (all steps)", r.results.as_ref().and_then(|x| x.get("tool_stats"))),
            ("eval after", r.after().and_then(|a| a.get("tool_stats"))),
        ];
        for (when, stats) in parts {
            let Some(obj) = stats.and_then(Value::as_object) else { continue };
            let _ = write!(s, "<tr><td>{}</td><td>{when}</td>", escape(&r.label));
            for k in KEYS {
                let _ = write!(s, "<td>{}</td>", obj.get(k).map(Value::to_string).unwrap_or_else(|| "–".into()));
            }
            let other: Vec<String> = obj.iter().filter(|(k, _)| !KEYS.contains(&k.as_str())).map(|(k, v)| format!("{k} {v}")).collect();
            let _ = write!(s, "<td>{}</td></tr>", escape(&other.join(", ")));
        }
    }
    s.push_str("</table>");
    s
}

fn transcripts(runs: &[RunData]) -> (String, usize) {
    let mut s = String::from("<h2>Transcripts</h2>");
    let mut count = 0;
    for r in runs {
        let list = |e: Option<&Value>| e.and_then(|e| e.get("transcripts")).and_then(Value::as_array).cloned().unwrap_or_default();
        let (before, after) = (list(r.before.as_ref()), list(r.after()));
        if before.is_empty() && after.is_empty() {
            continue;
        }
        let _ = write!(s, "<h3>{}</h3><div class=\"pair\"><b>before training</b><b>after training</b>", escape(&r.label));
        let id = |t: &Value| t.get("task_id").and_then(Value::as_str).unwrap_or("").to_string();
        let mut ids: Vec<String> = before.iter().chain(&after).map(id).collect();
        ids.dedup();
        let mut seen = std::collections::BTreeSet::new();
        for task in ids.into_iter().filter(|t| seen.insert(t.clone())) {
            for side in [&before, &after] {
                let eps: Vec<&Value> = side.iter().filter(|t| id(t) == task).collect();
                s.push_str("<div>");
                for t in eps {
                    count += 1;
                    let reward = num(t.get("reward"));
                    let class = if reward.is_some_and(|x| x > 0.0) { "ok" } else { "bad" };
                    let _ = write!(
                        s,
                        "<div class=\"ep\"><h4>{} <span class=\"{class}\">reward {}</span></h4>{}</div>",
                        escape(&task),
                        f3(reward),
                        transcript::render(t.get("text").and_then(Value::as_str).unwrap_or(""))
                    );
                }
                s.push_str("</div>");
            }
        }
        s.push_str("</div>");
    }
    if count == 0 {
        s.push_str("<p class=\"note\">No transcripts saved in these runs.</p>");
    }
    (s, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_the_textbook_values() {
        // 5 of 10: (0.2366, 0.7634) — e.g. Agresti & Coull; 0 of 4: (0, 0.4899).
        let (lo, hi) = wilson(5.0, 10.0);
        assert!((lo - 0.2366).abs() < 1e-4 && (hi - 0.7634).abs() < 1e-4, "{lo} {hi}");
        let (lo, hi) = wilson(0.0, 4.0);
        assert!(lo == 0.0 && (hi - 0.4899).abs() < 1e-4, "{hi}");
    }

    /// Issue #49: a weighted reward's components get one curve each, after the pass rate.
    #[test]
    fn each_reward_component_gets_a_curve() {
        let steps = (1..=3)
            .map(|i| serde_json::json!({"step": i, "reward_mean": 0.1 * i as f64, "pass_rate": 0.1, "rewards": {"hash": 0.1, "format-hash": 0.2 * i as f64}}))
            .collect();
        let run = RunData {
            dir: "run".into(),
            label: "run".into(),
            config: Default::default(),
            steps,
            results: None,
            before: None,
            before_instances: None,
            notes: Vec::new(),
        };
        let mut figures = Vec::new();
        curves(&[run], &mut figures);
        let names: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["curve-reward_mean", "curve-pass_rate", "curve-rewards.format-hash", "curve-rewards.hash"]);
        assert!(figures[2].svg.contains("reward component format-hash"));
    }
}
