//! `examples/own_loop.rs` — the hand-written loop — runs one step on a tiny model.

#[path = "../../examples/own_loop.rs"]
mod example;

#[test]
fn the_own_loop_example_runs_a_step() {
    let mut lines = Vec::new();
    let (before, after) = example::own_loop("tiny", 1, &mut |l| lines.push(l)).unwrap();
    assert!((0.0..=1.0).contains(&before) && (0.0..=1.0).contains(&after));
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[1].starts_with("step 1: reward "), "{lines:?}");
}
