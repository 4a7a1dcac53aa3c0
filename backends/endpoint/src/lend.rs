//! Lending a borrowed policy and chat codec to the endpoint's threads.
//!
//! The rollout engine holds the policy as `&mut dyn Policy` on its own thread (a model need
//! not be `Send`), while the endpoint serves each connection on a thread of its own. [`lend`]
//! runs the caller's work (start an endpoint, run episodes against it) on a scoped thread and
//! carries out every policy and codec call the endpoint makes on the calling thread, one at a
//! time, in the order they arrive: the endpoint gets a [`Policy`] and a [`ChatCodec`] that
//! forward each call there. Once the work returns, a call through a lent handle that outlived
//! it fails (the policy is no longer lent) instead of blocking.

use std::path::Path;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use arl_core::{ChatCodec, ChatError, Generation, Message, Policy, PolicyError, SamplingParams, ScoreParams, Scores, ToolSchema};

type Call = Box<dyn FnOnce(&mut dyn Policy, &dyn ChatCodec) + Send>;

enum Msg {
    Call(Call),
    /// The work returned (or panicked): stop serving.
    Done,
}

/// The sending side every lent handle shares.
struct Line(Mutex<Sender<Msg>>);

impl Line {
    /// Run `f` on the lending thread and wait for its result; `None` once lending has ended.
    fn call<T: Send + 'static>(&self, f: impl FnOnce(&mut dyn Policy, &dyn ChatCodec) -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = channel();
        let call: Call = Box::new(move |p, c| {
            let _ = tx.send(f(p, c));
        });
        self.0.lock().unwrap_or_else(|p| p.into_inner()).send(Msg::Call(call)).ok()?;
        rx.recv().ok()
    }
}

const NOT_LENT: &str = "the policy is no longer lent to the endpoint (its episodes have ended)";

/// The policy as the endpoint sees it: every call runs on the lending thread.
struct LentPolicy(Arc<Line>);

impl Policy for LentPolicy {
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        let (prompts, params) = (prompts.to_vec(), params.clone());
        self.0.call(move |p, _| p.generate(&prompts, &params)).unwrap_or_else(|| Err(PolicyError(NOT_LENT.into())))
    }

    fn score(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError> {
        let (sequences, positions) = (sequences.to_vec(), positions.map(<[Vec<usize>]>::to_vec));
        self.0.call(move |p, _| p.score(&sequences, positions.as_deref(), params)).unwrap_or_else(|| Err(PolicyError(NOT_LENT.into())))
    }
}

/// The codec as the endpoint sees it: every call runs on the lending thread.
struct LentCodec {
    line: Arc<Line>,
    stop_ids: Vec<u32>,
}

impl LentCodec {
    fn call<T: Send + 'static>(&self, f: impl FnOnce(&dyn ChatCodec) -> Result<T, ChatError> + Send + 'static) -> Result<T, ChatError> {
        self.line.call(move |_, c| f(c)).unwrap_or_else(|| Err(ChatError::Render(NOT_LENT.into())))
    }
}

impl ChatCodec for LentCodec {
    fn prompt_ids(&self, messages: &[Message], tools: &[ToolSchema]) -> Result<Vec<u32>, ChatError> {
        let (messages, tools) = (messages.to_vec(), tools.to_vec());
        self.call(move |c| c.prompt_ids(&messages, &tools))
    }

    fn observation_ids(
        &self,
        history: &[Message],
        observations: &[Message],
        tools: &[ToolSchema],
        stop: Option<u32>,
    ) -> Result<Vec<u32>, ChatError> {
        let (history, observations, tools) = (history.to_vec(), observations.to_vec(), tools.to_vec());
        self.call(move |c| c.observation_ids(&history, &observations, &tools, stop))
    }

    fn decode(&self, ids: &[u32]) -> Result<String, ChatError> {
        let ids = ids.to_vec();
        self.call(move |c| c.decode(&ids))
    }

    fn decode_transcript(&self, ids: &[u32]) -> Result<String, ChatError> {
        let ids = ids.to_vec();
        self.call(move |c| c.decode_transcript(&ids))
    }

    fn stop_ids(&self) -> &[u32] {
        &self.stop_ids
    }

    fn assistant_ids(&self, history: &[Message], tools: &[ToolSchema], assistant: &Message) -> Result<Vec<u32>, ChatError> {
        let (history, tools, assistant) = (history.to_vec(), tools.to_vec(), assistant.clone());
        self.call(move |c| c.assistant_ids(&history, &tools, &assistant))
    }

    fn self_check(&self) -> Result<String, ChatError> {
        self.call(|c| c.self_check())
    }

    fn save_files(&self, dir: &Path) -> Result<(), ChatError> {
        let dir = dir.to_path_buf();
        self.call(move |c| c.save_files(&dir))
    }
}

/// Sends [`Msg::Done`] when the work ends, returned or panicking.
struct DoneOnDrop(Sender<Msg>);

impl Drop for DoneOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(Msg::Done);
    }
}

/// Run `work` on a scoped thread with a policy and a codec that stand for `policy` and
/// `codec` (e.g. to start an [`crate::Endpoint`] over them); every call made through them is
/// carried out on this thread until `work` returns, whose result is returned. A panic in
/// `work` is resumed here.
pub fn lend<R: Send>(
    policy: &mut dyn Policy,
    codec: &dyn ChatCodec,
    work: impl FnOnce(Box<dyn Policy + Send>, Arc<dyn ChatCodec>) -> R + Send,
) -> R {
    let (tx, rx): (Sender<Msg>, Receiver<Msg>) = channel();
    let line = Arc::new(Line(Mutex::new(tx.clone())));
    let lent_policy = Box::new(LentPolicy(line.clone()));
    let lent_codec = Arc::new(LentCodec { line, stop_ids: codec.stop_ids().to_vec() });
    std::thread::scope(|s| {
        let worker = s.spawn(move || {
            let _done = DoneOnDrop(tx);
            work(lent_policy, lent_codec)
        });
        while let Ok(Msg::Call(call)) = rx.recv() {
            call(policy, codec);
        }
        drop(rx);
        worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arl_core::FinishReason;

    /// Counts its calls; not `Send` (as a model need not be).
    struct Counting {
        calls: std::rc::Rc<std::cell::Cell<u32>>,
    }

    impl Policy for Counting {
        fn generate(&mut self, prompts: &[Vec<u32>], _: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
            self.calls.set(self.calls.get() + 1);
            Ok(prompts
                .iter()
                .map(|p| Generation { ids: vec![p.len() as u32], sampler_logprobs: vec![-0.5], finish: FinishReason::Stop })
                .collect())
        }

        fn score(&self, _: &[Vec<u32>], _: Option<&[Vec<usize>]>, _: ScoreParams) -> Result<Scores, PolicyError> {
            Err(PolicyError("no scores".into()))
        }
    }

    struct Codec;

    impl ChatCodec for Codec {
        fn prompt_ids(&self, messages: &[Message], _: &[ToolSchema]) -> Result<Vec<u32>, ChatError> {
            Ok(vec![messages.len() as u32])
        }
        fn observation_ids(&self, _: &[Message], _: &[Message], _: &[ToolSchema], _: Option<u32>) -> Result<Vec<u32>, ChatError> {
            Ok(vec![])
        }
        fn decode(&self, ids: &[u32]) -> Result<String, ChatError> {
            Ok(format!("{ids:?}"))
        }
        fn stop_ids(&self) -> &[u32] {
            &[9]
        }
        fn self_check(&self) -> Result<String, ChatError> {
            Ok("ok".into())
        }
    }

    #[test]
    fn lent_calls_run_on_the_lending_thread_and_fail_after_it() {
        let calls = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut policy = Counting { calls: calls.clone() };
        let params = SamplingParams { temperature: 1.0, top_k: None, top_p: None, max_new_tokens: 1, seed: 0, stop_ids: None };
        let (mut kept, codec_kept) = lend(&mut policy, &Codec, |mut p, c| {
            // From threads of their own, as the endpoint's connections call them.
            std::thread::scope(|s| {
                for _ in 0..3 {
                    s.spawn(|| assert_eq!(c.decode(&[1, 2]).unwrap(), "[1, 2]"));
                }
            });
            let g = p.generate(&[vec![1, 2, 3]], &params).unwrap();
            assert_eq!((g[0].ids.as_slice(), c.stop_ids()), (&[3][..], &[9][..]));
            assert!(p.score(&[], None, ScoreParams::at(1.0)).unwrap_err().to_string().contains("no scores"));
            (p, c)
        });
        assert_eq!(calls.get(), 1);
        assert!(kept.generate(&[vec![1]], &params).unwrap_err().to_string().contains("no longer lent"));
        assert!(codec_kept.prompt_ids(&[], &[]).unwrap_err().to_string().contains("no longer lent"));
    }

    #[test]
    #[should_panic(expected = "the work panicked")]
    fn a_panic_in_the_work_reaches_the_lender() {
        let mut policy = Counting { calls: Default::default() };
        lend(&mut policy, &Codec, |_, _| panic!("the work panicked"));
    }
}
