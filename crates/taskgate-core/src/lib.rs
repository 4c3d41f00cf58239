//! Taskgate's domain types. Nothing here does I/O: ids, timestamps, the API key
//! format, scopes, money, and the task state machine.

pub mod duration;
pub mod ids;
pub mod key;
pub mod money;
pub mod task;
pub mod timefmt;

pub use ids::{IdKind, new_id};
pub use key::{ApiKeySecret, KeyType, Mode, Scope};
pub use money::Micros;
pub use task::TaskStatus;
