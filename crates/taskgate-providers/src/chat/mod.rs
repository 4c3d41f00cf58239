//! The `chat` kind, typed: the input a client sends ([`ChatInput`]), the
//! output it gets back ([`ChatOutput`]) and their JSON Schemas. Each upstream
//! family maps these to its own wire format (`upstream/*/chat.rs`).

mod count;
mod input;
mod output;
pub mod schema;

pub use count::estimate_input_tokens;
pub use input::{
    ChatInput, Content, DOCUMENT_TYPES, Effort, IMAGE_TYPES, Message, Part, Reasoning,
    ReasoningDetail, ReasoningFormat, ResponseFormat, Source, Tool, ToolCall, ToolChoice, ToolMode,
    media_type_of_url,
};
pub use output::{ChatOutput, FinishReason, ToolCallPieces, arguments_of};

#[cfg(test)]
mod tests;
