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
/// A piece that comes after text not yet at hand is left for a later read.
pub(super) fn merge(
    text: &str,
    others: impl Iterator<Item = (usize, Piece)>,
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
        into.push(piece);
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

pub(super) fn decode(s: &str) -> Option<(usize, Piece)> {
    let v: Value = serde_json::from_str(s).ok()?;
    let at = usize::try_from(v.get("at")?.as_u64()?).ok()?;
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
    Some((at, piece))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(decode(&encode(7, &piece)), Some((7, piece)));
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
            [now.clone(), later].into_iter(),
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
