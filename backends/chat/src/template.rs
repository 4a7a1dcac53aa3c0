//! HF chat templates rendered the way `transformers`' `apply_chat_template` renders them:
//! a Jinja environment with `trim_blocks` and `lstrip_blocks`, loop controls, Python string
//! and dict methods (minijinja-contrib's pycompat), HF's `tojson`, `raise_exception` and
//! `strftime_now`, and the special tokens of `tokenizer_config.json` in the context.

use minijinja::value::{Serde, Value};
use minijinja::{Environment, Error, ErrorKind, syntax::SyntaxConfig};
use serde_json::{Map, Value as Json};

use arl_core::ChatError;

use crate::tojson::tojson;

const NAME: &str = "chat_template";

/// A compiled chat template plus the special tokens HF passes to it.
pub struct ChatTemplate {
    env: Environment<'static>,
    /// `bos_token`, `eos_token`, … as strings, from `tokenizer_config.json`.
    special_tokens: Map<String, Json>,
}

/// What to render: the arguments of HF's `apply_chat_template`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RenderOptions {
    pub add_generation_prompt: bool,
    /// `None` leaves `enable_thinking` undefined (the template's default).
    pub enable_thinking: Option<bool>,
}

/// Marks an error raised by the template's own `raise_exception(...)`.
#[derive(Debug)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

impl ChatTemplate {
    /// Compile `source`; `origin` names where it came from in error messages.
    pub fn new(source: &str, origin: &str, special_tokens: Map<String, Json>) -> Result<Self, ChatError> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build();
        env.set_syntax(syntax.expect("default delimiters are valid"));
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", |message: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message.clone()).with_source(Raised(message)))
        });
        env.add_function("strftime_now", crate::strftime::strftime_now);
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| ChatError::TemplateSyntax { path: origin.to_string(), message: one_line(&e) })?;
        Ok(Self { env, special_tokens })
    }

    pub fn special_tokens(&self) -> &Map<String, Json> {
        &self.special_tokens
    }

    /// Render `messages` (HF JSON shape) with `tools` (OpenAI function format; `None` is
    /// Python's `tools=None`).
    pub fn render(&self, messages: &[Json], tools: Option<&[Json]>, options: RenderOptions) -> Result<String, ChatError> {
        let mut ctx = self.special_tokens.clone();
        ctx.insert("messages".into(), Json::Array(messages.to_vec()));
        ctx.insert("tools".into(), tools.map_or(Json::Null, |t| Json::Array(t.to_vec())));
        ctx.insert("add_generation_prompt".into(), Json::Bool(options.add_generation_prompt));
        if let Some(on) = options.enable_thinking {
            ctx.insert("enable_thinking".into(), Json::Bool(on));
        }
        let template = self.env.get_template(NAME).expect("added at construction");
        template.render(Value::from(Serde(Json::Object(ctx)))).map_err(|e| {
            match std::error::Error::source(&e).and_then(|s| s.downcast_ref::<Raised>()) {
                Some(Raised(message)) => ChatError::TemplateRaised(message.clone()),
                None => ChatError::Render(one_line(&e)),
            }
        })
    }
}

/// minijinja's error as one line: kind, detail and `(in chat_template:LINE)`.
fn one_line(e: &Error) -> String {
    e.to_string().replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(source: &str, messages: Json) -> Result<String, ChatError> {
        let t = ChatTemplate::new(source, "test", Map::new())?;
        t.render(messages.as_array().unwrap(), None, RenderOptions::default())
    }

    #[test]
    fn trims_blocks_like_hf() {
        let src = "{% for m in messages %}\n  {% if m.role == 'user' %}\n[{{ m.content }}]\n  {% endif %}\n{% endfor %}\n";
        assert_eq!(render(src, json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])).unwrap(), "[a]\n[b]\n");
    }

    #[test]
    fn python_methods_and_tojson() {
        let src =
            "{{ messages[0].content.split('x')[-1].strip() }}|{{ messages[::-1][0].content.startswith('q') }}|{{ messages[1] | tojson }}";
        let out = render(src, json!([{"role": "user", "content": "axb "}, {"role": "tool", "content": "q<é>"}])).unwrap();
        assert_eq!(out, r#"b|True|{"role": "tool", "content": "q<é>"}"#);
    }

    #[test]
    fn raise_exception_is_its_own_error() {
        let err = render("{{ raise_exception('only user and assistant roles are supported') }}", json!([])).unwrap_err();
        assert!(matches!(err, ChatError::TemplateRaised(_)), "{err:?}");
        assert_eq!(err.to_string(), "chat template refused the conversation: only user and assistant roles are supported");
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let err = render("{% for m in messages %}\n{{ m.content }", json!([])).unwrap_err();
        assert!(matches!(err, ChatError::TemplateSyntax { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.starts_with("chat template test has a syntax error: syntax error: "), "{msg}");
        assert!(msg.contains("(in chat_template:2)"), "{msg}");
        assert_eq!(msg.lines().count(), 1);
    }
}
