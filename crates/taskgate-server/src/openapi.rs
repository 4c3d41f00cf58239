//! The OpenAPI 3.1 document, generated from the wire types (`wire`), the
//! documented operations (`paths`), the live catalog (each API's input
//! and output schema is added as a component) and the chat kind's input and
//! output (`chat`: components whatever the catalog), and the `/docs` page
//! that renders it. What the attributes cannot say is added as JSON: each
//! API's POST /call body (`call`) and the rest (`exact`).
//!
//! The wire types are the documented shape of what `views.rs` and the
//! handlers write; the black-box tests check both against each other.

#![allow(dead_code)] // the doc-only functions exist for their attributes

mod call;
mod chat;
mod exact;
mod paths;
mod webhooks;
mod wire;

use bytes::Bytes;
use serde_json::{Value, json};
use taskgate_core::Mode;
use taskgate_store::KeyRecord;
use utoipa::OpenApi;

use crate::catalog::{ApiView, Catalog};
use call::{call_body, call_request_body, metadata_schema, sandbox_schema};
use exact::{exact, stream_data_schemas, stream_event_schema, task_links};
use paths::ApiDoc;

/// Whom a document is for. A reader without a key sees every API and the
/// test-only `sandbox` field; a key's holder sees exactly what that key may
/// send: its mode's fields and, for a restricted key, its allowed APIs.
#[derive(Clone, Copy, Default)]
pub struct Audience<'a> {
    pub mode: Option<Mode>,
    pub apis: Option<&'a taskgate_core::ApiList>,
}

impl Audience<'_> {
    fn sees(&self, slug: &str) -> bool {
        self.apis.is_none_or(|list| list.contains(slug))
    }

    /// `sandbox` is refused with live and restricted keys (400 `invalid_field`).
    fn may_send_sandbox(&self) -> bool {
        self.mode != Some(Mode::Live)
    }
}

/// The document served at `/api/v1/openapi.json` for `audience`, with each
/// visible API's schemas as components `<slug>.input` and `<slug>.output`
/// and its POST /call body as `<slug>.call`, and the chat kind's input,
/// output and stream events' data as `ChatInput`, `ChatOutput`, … (always).
pub fn document(catalog: &Catalog, audience: Audience<'_>) -> Vec<u8> {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_else(|_| json!({}));
    let entries: Vec<_> = catalog
        .all()
        .iter()
        .filter(|e| audience.sees(e.slug.as_str()))
        .collect();
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for entry in &entries {
            let s = &entry.spec;
            schemas.insert(format!("{}.input", s.slug), s.input_schema.clone());
            schemas.insert(format!("{}.output", s.slug), s.output_schema.clone());
            schemas.insert(format!("{}.call", s.slug), call_body(entry, audience));
        }
        schemas.extend(chat::components());
        schemas.extend(stream_data_schemas());
        schemas.insert("Metadata".into(), metadata_schema());
        if audience.may_send_sandbox() {
            schemas.insert("Sandbox".into(), sandbox_schema());
        }
    }
    doc["paths"]["/api/v1/call"]["post"]["requestBody"] = call_request_body(&entries);
    for code in ["200", "202"] {
        doc["paths"]["/api/v1/call"]["post"]["responses"][code]["links"] = task_links();
    }
    doc["paths"]["/api/v1/tasks/{id}/stream"]["get"]["responses"]["200"]["content"] =
        json!({ "text/event-stream": { "schema": stream_event_schema() } });
    doc["x-taskgate-apis"] = Value::Array(
        entries
            .iter()
            .filter_map(|e| serde_json::to_value(ApiView::new(e)).ok())
            .collect(),
    );
    webhooks::add(&mut doc);
    exact(&mut doc);
    serde_json::to_vec(&doc).unwrap_or_else(|_| b"{}".to_vec())
}

/// A self-contained page (no CDN, no downloads) that renders the document.
pub const DOCS_HTML: &str = include_str!("docs.html");

/// The documents of keys that see the whole catalog, made once at start;
/// a restricted key's is made when it asks (its APIs are its own).
pub struct Documents {
    anonymous: Bytes,
    live: Bytes,
    test: Bytes,
}

impl Documents {
    pub fn new(catalog: &Catalog) -> Self {
        let of = |mode| Bytes::from(document(catalog, Audience { mode, apis: None }));
        Documents {
            anonymous: of(None),
            live: of(Some(Mode::Live)),
            test: of(Some(Mode::Test)),
        }
    }

    /// The document for the holder of `key` (`None`: a reader without one).
    pub fn for_key(&self, catalog: &Catalog, key: Option<&KeyRecord>) -> Bytes {
        let Some(key) = key else {
            return self.anonymous.clone();
        };
        let mode = key.key_type.mode();
        match (&key.allowed_apis, mode) {
            (Some(apis), _) => Bytes::from(document(
                catalog,
                Audience {
                    mode: Some(mode),
                    apis: Some(apis),
                },
            )),
            (None, Mode::Live) => self.live.clone(),
            (None, Mode::Test) => self.test.clone(),
        }
    }
}
