//! Progress of long stages (rollouts, updates, evaluations) on stderr: a bar redrawn in place
//! on a terminal; otherwise plain lines, one when a stage ends and at most one every
//! [`PLAIN_EVERY`] while it runs, so logs of long GPU runs show life without flooding. A
//! stage's time runs from its first report (the trainer reports `0/total` when it starts)
//! and prints as `metrics::duration` does (`2.9s`, `1m05s`).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use arl_train::metrics::duration;

pub const PLAIN_EVERY: Duration = Duration::from_secs(30);

pub struct Progress<W: Write> {
    out: W,
    terminal: bool,
    stage: String,
    stage_start: Instant,
    last_line: Option<Instant>,
}

impl Progress<std::io::Stderr> {
    pub fn stderr() -> Self {
        let terminal = std::io::stderr().is_terminal();
        Self::new(std::io::stderr(), terminal)
    }
}

impl<W: Write> Progress<W> {
    pub fn new(out: W, terminal: bool) -> Self {
        Self { out, terminal, stage: String::new(), stage_start: Instant::now(), last_line: None }
    }

    /// `done` of `total` items of `stage` are finished.
    pub fn update(&mut self, stage: &str, done: usize, total: usize) {
        self.update_at(stage, done, total, Instant::now());
    }

    fn update_at(&mut self, stage: &str, done: usize, total: usize, now: Instant) {
        if stage != self.stage {
            self.stage = stage.to_string();
            self.stage_start = now;
            self.last_line = None;
        }
        let secs = duration(now.duration_since(self.stage_start).as_secs_f64());
        if self.terminal {
            let width = 24;
            let filled = (width * done).checked_div(total).unwrap_or(width).min(width);
            let _ = write!(self.out, "\r\x1b[K{stage} [{}{}] {done}/{total} {secs}", "#".repeat(filled), ".".repeat(width - filled));
            if done >= total {
                let _ = write!(self.out, "\r\x1b[K");
            }
            let _ = self.out.flush();
            return;
        }
        let due = self.last_line.is_none_or(|t| now.duration_since(t) >= PLAIN_EVERY) && done > 0;
        if done >= total || due {
            let _ = writeln!(self.out, "{stage}: {done}/{total} ({secs})");
            self.last_line = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_at_the_end_of_a_stage_and_at_most_every_thirty_seconds() {
        let mut p = Progress::new(Vec::new(), false);
        let t0 = Instant::now();
        p.update_at("step 1/20 rollout", 0, 8, t0);
        p.update_at("step 1/20 rollout", 2, 8, t0 + Duration::from_secs(1));
        p.update_at("step 1/20 rollout", 3, 8, t0 + Duration::from_secs(10));
        p.update_at("step 1/20 rollout", 5, 8, t0 + Duration::from_secs(31));
        p.update_at("step 1/20 rollout", 8, 8, t0 + Duration::from_secs(92));
        p.update_at("step 1/20 update", 0, 1, t0 + Duration::from_secs(92));
        p.update_at("step 1/20 update", 1, 1, t0 + Duration::from_millis(94_900));
        let text = String::from_utf8(p.out).unwrap();
        assert_eq!(
            text,
            "step 1/20 rollout: 2/8 (1.0s)\nstep 1/20 rollout: 5/8 (31.0s)\nstep 1/20 rollout: 8/8 (1m32s)\nstep 1/20 update: 1/1 (2.9s)\n"
        );
    }

    #[test]
    fn a_terminal_gets_a_bar_redrawn_in_place_and_cleared_at_the_end() {
        let mut p = Progress::new(Vec::new(), true);
        let t0 = Instant::now();
        p.update_at("eval", 1, 4, t0);
        p.update_at("eval", 4, 4, t0);
        let text = String::from_utf8(p.out).unwrap();
        assert!(text.starts_with("\r\x1b[Keval [######..................] 1/4 0.0s"), "{text:?}");
        assert!(text.ends_with("4/4 0.0s\r\x1b[K"), "{text:?}");
        assert!(!text.contains('\n'));
    }
}
