//! Handlers of `/api/v1`.

pub mod apis;
pub mod call;
pub mod tasks;
pub mod webhooks;

/// A page of a list: its items, whether more follow, and the cursor of the
/// next page.
#[derive(serde::Serialize)]
pub(crate) struct Page<T> {
    pub object: &'static str,
    pub items: Vec<T>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}
