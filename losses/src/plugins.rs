//! Every loss and advantage estimator, registered by name (`arl list`).

use arl_core::config::{AdvantageConfig, LossConfig};
use arl_core::{AdvantageFn, Aggregation, PluginError, PolicyLoss};

use crate::advantage::Estimator;
use crate::loss::Loss;
use crate::settings::{Defaults, Family};

const PPO_CLIP: (f64, f64) = (0.2, 0.2);

macro_rules! loss {
    ($fn:ident: $name:literal, $about:literal, $family:expr, $agg:expr, $clip:expr) => {
        fn $fn(c: &LossConfig) -> Result<Box<dyn PolicyLoss>, PluginError> {
            Ok(Box::new(Loss::build($name, $family, Defaults { aggregation: $agg, clip: $clip }, c)?))
        }
        arl_core::register!(LossPlugin { name: $name, about: $about, build: $fn });
    };
}

use Aggregation::*;
loss!(grpo: "grpo", "GRPO clipped surrogate (clip 0.2, token-mean as verl's default; --algo grpo: DeepSeekMath's seq-mean-token-mean)", Family::Clipped, TokenMean, PPO_CLIP);
loss!(ppo: "ppo", "PPO clipped surrogate (clip 0.2, token-mean; dual clip, decoupled optional)", Family::Clipped, TokenMean, PPO_CLIP);
loss!(gspo: "gspo", "GSPO: sequence-level ratio in the clipped surrogate (clip 3e-4/4e-4)", Family::GspoSeq, SeqMeanTokenMean, (3e-4, 4e-4));
loss!(gspo_token: "gspo-token", "GSPO token-level form sg(s_i)·π/sg(π) (clip 3e-4/4e-4)", Family::GspoToken, SeqMeanTokenMean, (3e-4, 4e-4));
loss!(cispo: "cispo", "CISPO: clipped, detached IS weight on log π (clip_low 1.0 = no lower bound, clip_high 0.2)", Family::Cispo, TokenMean, (1.0, 0.2));
loss!(sapo: "sapo", "SAPO: soft sigmoid gate, tau_pos 1.0 / tau_neg 1.05", Family::Sapo, SeqMeanTokenMean, PPO_CLIP);
loss!(dppo_tv: "dppo-tv", "DPPO with the binary total-variation mask (delta 0.15, is_cap 20)", Family::DppoTv, ConstantHorizon, PPO_CLIP);
loss!(dppo_kl: "dppo-kl", "DPPO with the binary-KL mask (delta 0.05, is_cap 20)", Family::DppoKl, ConstantHorizon, PPO_CLIP);
loss!(dro: "dro", "DRO: −(log π·Â − β/2·(log π − log π_old)²), needs loss.dro_beta", Family::Dro, TokenMean, PPO_CLIP);
loss!(is: "is", "plain importance sampling −sg(w)·Â·log π, no trust region (optional is_cap)", Family::Is, TokenMean, PPO_CLIP);
loss!(reinforce: "reinforce", "REINFORCE −Â·log π", Family::Reinforce, TokenMean, PPO_CLIP);
loss!(cross_entropy: "cross-entropy", "supervised cross-entropy −log π on the masked tokens, token-mean (SFT; advantages ignored)", Family::CrossEntropy, TokenMean, PPO_CLIP);

macro_rules! estimator {
    ($fn:ident: $name:literal, $about:literal) => {
        fn $fn(c: &AdvantageConfig) -> Result<Box<dyn AdvantageFn>, PluginError> {
            Ok(Box::new(Estimator::build($name, c)?))
        }
        arl_core::register!(AdvantagePlugin { name: $name, about: $about, build: $fn });
    };
}

estimator!(adv_grpo: "grpo", "(R − mean_group)/(std_group + 1e-6), unbiased std; a group of one: R/(1 + 1e-6) (verl)");
estimator!(adv_drgrpo: "drgrpo", "R − mean_group (no std); a group of one: R (verl)");
estimator!(adv_rloo: "rloo", "R − leave-one-out group mean; a group of one: R (verl)");
estimator!(adv_liteppo: "liteppo", "(R − mean_group)/(std_batch + 1e-6); a group of one: 0 (AReaL)");
estimator!(adv_reinforce_pp: "reinforce++", "R whitened over the batch's response tokens, (R − m)/√(v + 1e-8) (verl masked_whiten)");
estimator!(adv_reinforce_pp_baseline: "reinforce++-baseline", "R − mean_group (0 for a group of one), whitened over the batch's response tokens (verl)");
estimator!(adv_norm: "norm", "AReaL NormConfig, defaults mean_level=batch std_level=batch, unbiased, eps 1e-5");
