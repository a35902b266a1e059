//! JSON read strictly: a key written twice in one object is refused, at any depth, instead
//! of the last one silently winning (docs/guide/files.md, "Cases").

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses one JSON text; an object with a key written twice is an error naming the key.
pub(crate) fn from_str(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<Strict>(text).map(|s| s.0)
}

/// A JSON value whose objects were each written with distinct keys.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "`{key}` is written twice in one object"
                )));
            }
            let Strict(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// serde_json's message without the position it appends (the caller names it).
pub(crate) fn message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) => message.to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_written_twice_are_refused_at_any_depth() {
        for text in [
            r#"{"expected":"A","expected":"B"}"#,
            r#"{"id":"a","vars":{"q":1,"q":2}}"#,
            r#"{"expected":[{"x":1,"x":1}]}"#,
        ] {
            let e = from_str(text).unwrap_err();
            assert!(
                message(&e).contains("is written twice in one object"),
                "{e}"
            );
            assert!(e.column() > 0);
        }
        let v = from_str(r#"{"a":{"b":[1,2.5,"x",null,true]},"b":1}"#).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a":{"b":[1,2.5,"x",null,true]},"b":1})
        );
    }
}
