//! [`SingleTurn`]: the session of an env whose episode is one reply (no tools), graded as a
//! whole — the `sum` example, the `dataset` env and `arl new env`'s template.

use crate::{AssistantTurn, EnvError, EnvSession, Message, Outcome, Step};

/// A one-turn episode: the opening `messages`, then the reply graded by
/// `grade(text, truncated)`. A turn's tool calls are not run: its text is the answer. An
/// episode cut by a token budget before any reply is graded as the empty reply, truncated.
pub struct SingleTurn<G> {
    messages: Vec<Message>,
    grade: G,
    done: bool,
}

impl<G: FnMut(&str, bool) -> Outcome + Send> SingleTurn<G> {
    /// A session that opens with `messages` and grades its one reply with `grade`.
    pub fn new(messages: Vec<Message>, grade: G) -> Self {
        Self { messages, grade, done: false }
    }

    fn end(&mut self, text: &str, truncated: bool) -> Result<Outcome, EnvError> {
        if std::mem::replace(&mut self.done, true) {
            return Err(EnvError::Finished);
        }
        Ok((self.grade)(text, truncated))
    }
}

impl<G: FnMut(&str, bool) -> Outcome + Send> EnvSession for SingleTurn<G> {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn step(&mut self, turn: &AssistantTurn) -> Result<Step, EnvError> {
        self.end(&turn.text, false).map(Step::Done)
    }

    fn finish(&mut self) -> Result<Outcome, EnvError> {
        self.end("", true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EpisodeStats;

    fn session() -> SingleTurn<impl FnMut(&str, bool) -> Outcome + Send> {
        SingleTurn::new(vec![Message::user("say hi")], |text: &str, truncated| Outcome {
            reward: f64::from(u8::from(text == "hi")),
            stats: EpisodeStats { turns: 1, truncated, ..Default::default() },
        })
    }

    #[test]
    fn one_reply_is_graded_once_and_ends_the_episode() {
        let mut s = session();
        assert_eq!(s.messages(), [Message::user("say hi")]);
        let Step::Done(outcome) = s.step(&AssistantTurn { text: "hi".into(), calls: vec![] }).unwrap() else { panic!("not done") };
        assert_eq!((outcome.reward, outcome.stats.truncated), (1.0, false));
        assert!(matches!(s.step(&AssistantTurn { text: "hi".into(), calls: vec![] }), Err(EnvError::Finished)));
        assert!(matches!(s.finish(), Err(EnvError::Finished)));
    }

    #[test]
    fn a_budget_cut_before_the_reply_grades_the_empty_reply_as_truncated() {
        let mut s = session();
        let outcome = s.finish().unwrap();
        assert_eq!((outcome.reward, outcome.stats.truncated), (0.0, true));
        assert!(matches!(s.finish(), Err(EnvError::Finished)));
    }
}
