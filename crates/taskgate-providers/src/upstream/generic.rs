//! Placeholder: being written.

use async_trait::async_trait;

use super::http::{Conn, UpstreamError};
use super::{Adapter, Call};
use crate::Execution;
use crate::kinds::Kind;



pub(crate) struct Generic {
    conn: Conn,
}

impl Generic {
    pub fn new(conn: Conn) -> Self {
        Self { conn }
    }
}

#[async_trait]
impl Adapter for Generic {
    fn conn(&self) -> &Conn {
        &self.conn
    }

    fn supports(&self, kind: Kind) -> bool {
        kind == Kind::Chat
    }

    async fn call(&self, _call: &mut Call<'_>) -> Result<Execution, UpstreamError> {
        Err(UpstreamError::invalid("not written yet"))
    }
}
