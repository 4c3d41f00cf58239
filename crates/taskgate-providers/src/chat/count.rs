//! An estimate of a chat input's tokens, made without any provider (for
//! Anthropic's `count_tokens`, which Claude Code asks often to size its
//! context): texts, tool definitions and calls by o200k_base, media by the
//! most the providers charge for one (an image as one of up to 1.15
//! megapixels, a PDF per page). Tokenizers differ by family, so it is an
//! estimate, never a bill.

use base64::Engine;

use super::input::{ChatInput, Content, Message, Part, ReasoningDetail, Source};

/// Texts longer than this are counted as a token per 4 bytes, not
/// tokenized: an estimate needs no more, and the work stays bounded.
const TOKENIZED_MAX_BYTES: usize = 256 * 1024;

fn text_tokens(text: &str) -> u64 {
    if text.len() > TOKENIZED_MAX_BYTES {
        (text.len() as u64).div_ceil(4)
    } else {
        crate::builtin::text_tokens(text)
    }
}

/// A message's own tokens (its role and delimiters).
const PER_MESSAGE: u64 = 4;
/// A tool definition's own tokens, beside its name, description and schema.
const PER_TOOL: u64 = 8;
/// An image: the most Anthropic counts for one (1.15 megapixels / 750).
const PER_IMAGE: u64 = 1_600;
/// A PDF page: text and the page's image, as Anthropic counts them.
const PER_PDF_PAGE: u64 = 1_500;

/// The estimated input tokens of `input`.
pub fn estimate_input_tokens(input: &ChatInput) -> u64 {
    let mut n = 0;
    for m in &input.messages {
        n += PER_MESSAGE;
        match m {
            Message::System { content } | Message::User { content } => n += content_tokens(content),
            Message::Tool {
                tool_call_id,
                content,
            } => n += text_tokens(tool_call_id) + content_tokens(content),
            Message::Assistant {
                content,
                tool_calls,
                reasoning_details,
            } => {
                n += content.as_ref().map_or(0, content_tokens);
                // Thinking sent back is read as input (Anthropic's is).
                for d in reasoning_details {
                    if let ReasoningDetail::Thinking { text, .. } = d {
                        n += text_tokens(text);
                    }
                }
                for c in tool_calls {
                    n += text_tokens(&c.name)
                        + text_tokens(&serde_json::Value::Object(c.arguments.clone()).to_string());
                }
            }
        }
    }
    for t in &input.tools {
        n += PER_TOOL + text_tokens(&t.name);
        n += t.description.as_deref().map_or(0, text_tokens);
        n += t
            .parameters
            .as_ref()
            .map_or(0, |p| text_tokens(&p.to_string()));
    }
    n
}

fn content_tokens(content: &Content) -> u64 {
    match content {
        Content::Text(t) => text_tokens(t),
        Content::Parts(parts) => parts.iter().map(part_tokens).sum(),
    }
}

fn part_tokens(part: &Part) -> u64 {
    match part {
        Part::Text { text } => text_tokens(text),
        Part::Image { .. } => PER_IMAGE,
        Part::Document { source } => match source {
            Source::Data { data, media_type } => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .unwrap_or_default();
                if media_type == "text/plain" {
                    text_tokens(&String::from_utf8_lossy(&bytes))
                } else {
                    PER_PDF_PAGE * pdf_pages(&bytes)
                }
            }
            // A document by URL is not fetched: one page.
            Source::Url { .. } => PER_PDF_PAGE,
        },
    }
}

/// The pages of a PDF: its `/Type /Page` objects (not `/Pages`); where
/// none shows (compressed object streams), the largest `/Count` (the page
/// tree's root); at least one.
fn pdf_pages(pdf: &[u8]) -> u64 {
    let objects = page_objects(pdf);
    if objects > 0 {
        return objects;
    }
    largest_count(pdf).max(1)
}

fn page_objects(pdf: &[u8]) -> u64 {
    let mut pages = 0;
    let mut rest = pdf;
    while let Some(at) = find(rest, b"/Type") {
        rest = &rest[at + 5..];
        let name = rest.trim_ascii_start();
        if let Some(after) = name.strip_prefix(b"/Page")
            && !after.first().is_some_and(u8::is_ascii_alphanumeric)
        {
            pages += 1;
        }
    }
    pages
}

/// The largest `/Count N` in the file (0 without one).
fn largest_count(pdf: &[u8]) -> u64 {
    let mut largest = 0;
    let mut rest = pdf;
    while let Some(at) = find(rest, b"/Count") {
        rest = &rest[at + 6..];
        let digits: Vec<u8> = rest
            .trim_ascii_start()
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .take(7)
            .copied()
            .collect();
        if let Some(n) = std::str::from_utf8(&digits)
            .ok()
            .and_then(|d| d.parse::<u64>().ok())
        {
            largest = largest.max(n);
        }
    }
    largest
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn count(v: serde_json::Value) -> u64 {
        estimate_input_tokens(&ChatInput::parse(&v).unwrap())
    }

    #[test]
    fn texts_tools_and_media_add_up() {
        let hello = count(json!({"messages": [{"role": "user", "content": "Hello there"}]}));
        assert_eq!(hello, PER_MESSAGE + text_tokens("Hello there"));
        assert_eq!(text_tokens("Hello there"), 2);
        let with_tool = count(
            json!({"messages": [{"role": "user", "content": "Hello there"}],
                                     "tools": [{"name": "f", "description": "Does f."}]}),
        );
        assert_eq!(
            with_tool,
            hello + PER_TOOL + text_tokens("f") + text_tokens("Does f.")
        );
        let image = count(json!({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "Hello there"},
            {"type": "image", "url": "https://example.com/a.png"}]}]}));
        assert_eq!(image, hello + PER_IMAGE);
    }

    #[test]
    fn a_pdf_counts_its_pages() {
        let pdf = b"%PDF-1.4 1 0 obj <</Type /Pages /Count 2>> 2 0 obj <</Type /Page>> \
                    3 0 obj <</Type/Page /Parent 1 0 R>> trailer";
        assert_eq!(pdf_pages(pdf), 2);
        assert_eq!(pdf_pages(b"not a pdf"), 1);
        // Page objects compressed away: the page tree's count.
        assert_eq!(
            pdf_pages(b"%PDF-1.7 <</Type/Pages/Count 12/Kids[...]>> /ObjStm"),
            12
        );
    }
}
