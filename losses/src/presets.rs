//! Algorithm presets (`--algo NAME`, `algo = "NAME"`): the loss, advantage, clip and
//! aggregation keys that together make one published recipe (SPEC.md §4–5). A preset only
//! fills keys the user left unset (defaults ← preset ← file ← flags ← --set).
//!
//! Presets set what a loss and an estimator can express. Recipe parts that belong to the
//! trainer are not here: DAPO's dynamic sampling and overlong shaping, GRPO's β (KL needs a
//! reference model; set `loss.kl_coef` yourself).

arl_core::register_preset!(AlgoPreset {
    name: "grpo",
    about: "GRPO (DeepSeekMath): clipped surrogate ε 0.2, per-sequence mean, group z-score advantages",
    settings: &[
        ("loss.name", "\"grpo\""),
        ("loss.aggregation", "\"seq-mean-token-mean\""),
        ("loss.clip_low", "0.2"),
        ("loss.clip_high", "0.2"),
        ("advantage.name", "\"grpo\""),
    ],
});

arl_core::register_preset!(AlgoPreset {
    name: "drgrpo",
    about: "Dr.GRPO: no std division, token sum over a constant horizon",
    settings: &[
        ("loss.name", "\"grpo\""),
        ("loss.aggregation", "\"constant-horizon\""),
        ("loss.clip_low", "0.2"),
        ("loss.clip_high", "0.2"),
        ("advantage.name", "\"drgrpo\""),
    ],
});

arl_core::register_preset!(AlgoPreset {
    name: "dapo",
    about: "DAPO: clip-higher (0.2/0.28), token-mean, dynamic sampling (up to 10 rounds, verl's recipe); \
            overlong shaping is opt-in (trainer.overlong_buffer: its L_cache depends on the budget)",
    settings: &[
        ("loss.name", "\"grpo\""),
        ("loss.aggregation", "\"token-mean\""),
        ("loss.clip_low", "0.2"),
        ("loss.clip_high", "0.28"),
        ("advantage.name", "\"grpo\""),
        ("trainer.max_sampling_attempts", "10"),
        ("trainer.skip_zero_variance", "true"),
    ],
});

arl_core::register_preset!(AlgoPreset {
    name: "gspo",
    about: "GSPO: sequence-level ratio, clip 3e-4/4e-4, seq-mean-token-mean",
    settings: &[
        ("loss.name", "\"gspo\""),
        ("loss.aggregation", "\"seq-mean-token-mean\""),
        ("loss.clip_low", "3e-4"),
        ("loss.clip_high", "4e-4"),
        ("advantage.name", "\"grpo\""),
    ],
});

arl_core::register_preset!(AlgoPreset {
    name: "rloo",
    about: "RLOO: leave-one-out baseline, no std; clipped surrogate (= REINFORCE on-policy), token-mean",
    settings: &[
        ("loss.name", "\"grpo\""),
        ("loss.aggregation", "\"token-mean\""),
        ("loss.clip_low", "0.2"),
        ("loss.clip_high", "0.2"),
        ("advantage.name", "\"rloo\""),
    ],
});

arl_core::register_preset!(AlgoPreset {
    name: "liteppo",
    about: "LitePPO: group mean, batch std, token-mean clipped surrogate",
    settings: &[
        ("loss.name", "\"ppo\""),
        ("loss.aggregation", "\"token-mean\""),
        ("loss.clip_low", "0.2"),
        ("loss.clip_high", "0.2"),
        ("advantage.name", "\"liteppo\""),
    ],
});

arl_core::register_preset!(AlgoPreset {
    name: "cispo",
    about: "CISPO: clipped detached IS weight (no lower bound, ε_high 0.2), token-mean",
    settings: &[
        ("loss.name", "\"cispo\""),
        ("loss.aggregation", "\"token-mean\""),
        ("loss.clip_low", "1.0"),
        ("loss.clip_high", "0.2"),
        ("advantage.name", "\"grpo\""),
    ],
});

arl_core::register_preset!(AlgoPreset {
    name: "sapo",
    about: "SAPO: soft gate tau_pos 1.0 / tau_neg 1.05, seq-mean-token-mean",
    settings: &[
        ("loss.name", "\"sapo\""),
        ("loss.aggregation", "\"seq-mean-token-mean\""),
        ("loss.tau_pos", "1.0"),
        ("loss.tau_neg", "1.05"),
        ("advantage.name", "\"grpo\""),
    ],
});

arl_core::register_preset!(AlgoPreset {
    name: "dppo",
    about: "DPPO: binary total-variation trust region δ 0.15, IS cap 20, constant horizon",
    settings: &[
        ("loss.name", "\"dppo-tv\""),
        ("loss.aggregation", "\"constant-horizon\""),
        ("loss.delta_low", "0.15"),
        ("loss.delta_high", "0.15"),
        ("loss.is_cap", "20.0"),
        ("advantage.name", "\"grpo\""),
    ],
});

arl_core::register_preset!(AlgoPreset {
    name: "icepop",
    about: "IcePop: decoupled PPO, tokens with π_old/π_behave outside [0.5, 5] masked",
    settings: &[
        ("loss.name", "\"grpo\""),
        ("loss.clip_low", "0.2"),
        ("loss.clip_high", "0.2"),
        ("loss.decoupled", "true"),
        ("loss.icepop.lower", "0.5"),
        ("loss.icepop.upper", "5.0"),
        ("advantage.name", "\"grpo\""),
    ],
});

arl_core::register_preset!(AlgoPreset {
    name: "kpop",
    about: "KPop: decoupled PPO, tokens with symmetric binary KL(π_old, π_behave) > 2 masked",
    settings: &[
        ("loss.name", "\"grpo\""),
        ("loss.clip_low", "0.2"),
        ("loss.clip_high", "0.2"),
        ("loss.decoupled", "true"),
        ("loss.kpop.upper", "2.0"),
        ("advantage.name", "\"grpo\""),
    ],
});
