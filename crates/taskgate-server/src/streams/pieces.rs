//! Reading a stream's pieces from a cursor, and the other pieces' form in
//! Redis.

use serde_json::{Value, json};
use taskgate_providers::Piece;

/// Where a reader of a stream is: the bytes of text and the count of other
/// pieces (reasoning, tool-call fragments) it has read. Starts at the
/// stream's beginning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub text: usize,
    pub pieces: usize,
}

/// Appends to `into`, in order, the text (`text`, the text from
/// `cursor.text` on) and the other pieces past the cursor (`others`, each
/// with the text offset it came at), moving the cursor past what is given.
/// A piece that comes after text not yet at hand is left for a later read;
/// a piece that could not be read (`None`: written by a newer instance)
/// is passed over, the cursor moving past it all the same.
pub(super) fn merge(
    text: &str,
    others: impl Iterator<Item = (usize, Option<Piece>)>,
    cursor: &mut Cursor,
    into: &mut Vec<Piece>,
) {
    let base = cursor.text;
    let end = base + text.len();
    for (at, piece) in others {
        if at > end {
            break;
        }
        if at > cursor.text
            && let Some(before) = text.get(cursor.text - base..at - base)
        {
            into.push(Piece::Text(before.to_owned()));
            cursor.text = at;
        }
        into.extend(piece);
        cursor.pieces += 1;
    }
    if end > cursor.text {
        into.push(Piece::Text(text[cursor.text - base..].to_owned()));
        cursor.text = end;
    }
}

/// A piece other than text, and the text offset it came at, as stored in
/// Redis.
pub(super) fn encode(at: usize, piece: &Piece) -> String {
    match piece {
        Piece::Text(text) => json!({"at": at, "text": text}),
        Piece::Reasoning(text) => json!({"at": at, "reasoning": text}),
        Piece::ReasoningSignature(sig) => json!({"at": at, "signature": sig}),
        Piece::RedactedReasoning(data) => json!({"at": at, "redacted": data}),
        Piece::ToolCall {
            index,
            id,
            name,
            arguments,
        } => json!({"at": at, "tool_call": {"index": index, "id": id, "name": name, "arguments": arguments}}),
    }
    .to_string()
}

/// A stored piece and its offset; `None` for a piece of a kind this version
/// does not know (or not a piece at all), at the offset it gives, else 0.
pub(super) fn decode(s: &str) -> (usize, Option<Piece>) {
    let v: Value = serde_json::from_str(s).unwrap_or(Value::Null);
    let at = v
        .get("at")
        .and_then(Value::as_u64)
        .and_then(|a| usize::try_from(a).ok())
        .unwrap_or(0);
    (at, piece_of(&v))
}

fn piece_of(v: &Value) -> Option<Piece> {
    let string = |v: &Value| v.as_str().map(str::to_owned);
    let piece = if let Some(t) = v.get("text") {
        Piece::Text(string(t)?)
    } else if let Some(t) = v.get("reasoning") {
        Piece::Reasoning(string(t)?)
    } else if let Some(t) = v.get("signature") {
        Piece::ReasoningSignature(string(t)?)
    } else if let Some(t) = v.get("redacted") {
        Piece::RedactedReasoning(string(t)?)
    } else {
        let c = v.get("tool_call")?;
        Piece::ToolCall {
            index: u32::try_from(c.get("index")?.as_u64()?).ok()?,
            id: c.get("id").and_then(string),
            name: c.get("name").and_then(string),
            arguments: string(c.get("arguments")?)?,
        }
    };
    Some(piece)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_of_an_unknown_kind_is_passed_over_not_stuck_on() {
        let mut cursor = Cursor::default();
        let mut into = Vec::new();
        let others = [
            r#"{"at": 0, "hologram": "?"}"#.to_owned(),
            encode(1, &Piece::Reasoning("r".to_owned())),
        ];
        merge(
            "ab",
            others.iter().map(|o| decode(o)),
            &mut cursor,
            &mut into,
        );
        assert_eq!(cursor, Cursor { text: 2, pieces: 2 });
        assert_eq!(
            into,
            [
                Piece::Text("a".to_owned()),
                Piece::Reasoning("r".to_owned()),
                Piece::Text("b".to_owned())
            ]
        );
    }

    #[test]
    fn pieces_cross_redis_unchanged() {
        for piece in [
            Piece::Reasoning("Hmm".to_owned()),
            Piece::ReasoningSignature("c2ln".to_owned()),
            Piece::RedactedReasoning("ZW5j".to_owned()),
            Piece::ToolCall {
                index: 1,
                id: Some("call_1".to_owned()),
                name: Some("f".to_owned()),
                arguments: "{\"a\"".to_owned(),
            },
            Piece::ToolCall {
                index: 1,
                id: None,
                name: None,
                arguments: ":1}".to_owned(),
            },
        ] {
            assert_eq!(decode(&encode(7, &piece)), (7, Some(piece)));
        }
    }

    #[test]
    fn a_piece_past_the_text_at_hand_waits() {
        let mut cursor = Cursor { text: 2, pieces: 0 };
        let mut into = Vec::new();
        let later = (9, Piece::Reasoning("later".to_owned()));
        let now = (3, Piece::Reasoning("now".to_owned()));
        merge(
            "abcd",
            [now.clone(), later]
                .into_iter()
                .map(|(at, p)| (at, Some(p))),
            &mut cursor,
            &mut into,
        );
        assert_eq!(
            into,
            [
                Piece::Text("a".to_owned()),
                now.1,
                Piece::Text("bcd".to_owned())
            ]
        );
        assert_eq!(cursor, Cursor { text: 6, pieces: 1 });
    }
}
