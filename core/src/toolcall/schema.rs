//! A small JSON Schema checker for the subset schemars emits for tool arguments: `type`
//! (one or a list, `null` for options), `properties` + `required` (unknown keys are always
//! rejected: a model that invents an argument made a malformed call), `enum`, `const`,
//! `items`, `minimum`/`maximum`, `anyOf`/`oneOf`, and `$ref` into `$defs`/`definitions`.
//! Anything else in a schema is ignored.

use serde_json::{Map, Value};

/// Check `args` against the tool's `parameters` schema; the error names the argument.
pub fn check_arguments(schema: &Value, args: &Value) -> Result<(), String> {
    check(schema, schema, args, "")
}

fn check(root: &Value, schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let Value::Object(s) = schema else {
        // `true` accepts everything, `false` nothing.
        return if schema == &Value::Bool(false) { Err(format!("{} is not allowed", name(path))) } else { Ok(()) };
    };
    if let Some(Value::String(reference)) = s.get("$ref") {
        let target = resolve(root, reference).ok_or_else(|| format!("schema reference {reference} not found"))?;
        return check(root, target, value, path);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = s.get(key) {
            let mut first_error = None;
            for option in options {
                match check(root, option, value, path) {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            return Err(first_error.unwrap_or_else(|| format!("{} matches no allowed shape", name(path))));
        }
    }
    if let Some(types) = s.get("type") {
        let allowed: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !allowed.is_empty() && !allowed.iter().any(|t| has_type(value, t)) {
            return Err(format!("{} must be {}, got {}", name(path), allowed.join(" or "), kind(value)));
        }
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(value)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        return Err(format!("{} must be one of {}", name(path), list.join(", ")));
    }
    if let Some(constant) = s.get("const")
        && constant != value
    {
        return Err(format!("{} must be {constant}", name(path)));
    }
    if let Some(x) = value.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64)
            && x < min
        {
            return Err(format!("{} must be at least {min}", name(path)));
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64)
            && x > max
        {
            return Err(format!("{} must be at most {max}", name(path)));
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, s.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check(root, item_schema, item, &format!("{path}[{i}]"))?;
        }
    }
    if let Value::Object(object) = value {
        check_object(root, s, object, path)?;
    }
    Ok(())
}

fn check_object(root: &Value, s: &Map<String, Value>, object: &Map<String, Value>, path: &str) -> Result<(), String> {
    let empty = Map::new();
    let properties = s.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    if let Some(Value::Array(required)) = s.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(key) {
                return Err(format!("missing required argument `{}`", join(path, key)));
            }
        }
    }
    for (key, value) in object {
        match properties.get(key) {
            Some(property) => check(root, property, value, &join(path, key))?,
            None => match s.get("additionalProperties") {
                Some(extra @ Value::Object(_)) => check(root, extra, value, &join(path, key))?,
                _ => return Err(format!("unexpected argument `{}`", join(path, key))),
            },
        }
    }
    Ok(())
}

fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

fn has_type(value: &Value, t: &str) -> bool {
    match t {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|x| x.fract() == 0.0 && x.abs() < 9e15),
        _ => true,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn name(path: &str) -> String {
    if path.is_empty() { "the arguments".into() } else { format!("`{path}`") }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(schema: Value, args: Value) -> Result<(), String> {
        check_arguments(&schema, &args)
    }

    #[test]
    fn types_enums_refs_and_nesting() {
        let schema = json!({
            "type": "object",
            "properties": {
                "mode": {"$ref": "#/$defs/Mode"},
                "lines": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                "note": {"type": ["string", "null"]},
                "pick": {"oneOf": [{"type": "string", "const": "all"}, {"type": "integer"}]}
            },
            "required": ["mode"],
            "$defs": {"Mode": {"type": "string", "enum": ["fast", "slow"]}}
        });
        assert_eq!(check(schema.clone(), json!({"mode": "fast", "lines": [1, 2], "note": null, "pick": 3})), Ok(()));
        assert_eq!(check(schema.clone(), json!({"mode": "slow", "pick": "all"})), Ok(()));
        let err = |args| check(schema.clone(), args).unwrap_err();
        assert!(err(json!({"mode": "medium"})).contains("`mode` must be one of \"fast\", \"slow\""));
        assert!(err(json!({"mode": "fast", "lines": [1, 0]})).contains("`lines[1]` must be at least 1"));
        assert!(err(json!({"mode": "fast", "lines": "1"})).contains("`lines` must be array"));
        assert!(err(json!({"mode": "fast", "pick": "some"})).contains("`pick` must be \"all\""));
        assert!(err(json!({"mode": "fast", "note": 3})).contains("`note` must be string or null"));
        assert!(err(json!({})).contains("missing required argument `mode`"));
        assert!(err(json!([])).contains("the arguments must be object"));
    }

    #[test]
    fn nested_objects_reject_unknown_keys_by_path() {
        let schema = json!({"type": "object", "properties": {"span": {"type": "object", "properties": {"start": {"type": "integer"}}, "required": ["start"]}}});
        assert_eq!(check(schema.clone(), json!({"span": {"start": 2}})), Ok(()));
        assert!(check(schema.clone(), json!({"span": {"start": 2, "end": 3}})).unwrap_err().contains("unexpected argument `span.end`"));
        assert!(check(schema, json!({"span": {}})).unwrap_err().contains("missing required argument `span.start`"));
    }
}
