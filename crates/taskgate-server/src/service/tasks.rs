//! A caller's tasks: one found by id, a page of the history, a cancel that
//! stops the work. A key sees its account's tasks of its own mode, and a
//! restricted key only those of the APIs it may call; the dashboard sees an
//! account's tasks of the mode it shows.

use taskgate_core::{AccountId, ApiList, Mode, TaskId, TaskStatus};
use taskgate_store::{StoreError, TaskQuery, TaskRecord};

use std::sync::Arc;

use crate::principal::Principal;
use crate::state::AppState;

#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// Not a task of the caller's (unknown, another account's or mode's,
    /// or an API a restricted key may not call): all look the same.
    #[error("there is no task {0}")]
    NotFound(TaskId),
    /// Only queued and running tasks can be cancelled.
    #[error("the task has already {0}")]
    NotCancellable(TaskStatus),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The tasks a caller sees: an account's of one mode, and of `apis` only
/// when given.
#[derive(Clone, Copy)]
pub struct Holder<'a> {
    pub account: AccountId,
    pub mode: Mode,
    pub apis: Option<&'a ApiList>,
}

impl<'a> Holder<'a> {
    /// What a key sees.
    pub fn of(principal: &'a Principal) -> Self {
        Holder {
            account: principal.account_id,
            mode: principal.mode,
            apis: principal.allowed_apis.as_deref(),
        }
    }

    /// An account's tasks of one mode, of any API (the dashboard).
    pub fn account(account: AccountId, mode: Mode) -> Self {
        Holder {
            account,
            mode,
            apis: None,
        }
    }

    fn sees(&self, task: &TaskRecord) -> bool {
        self.apis
            .is_none_or(|list| list.contains(task.api.as_str()))
    }
}

pub async fn find(app: &AppState, holder: Holder<'_>, id: TaskId) -> Result<TaskRecord, TaskError> {
    app.store
        .get_task(holder.account, holder.mode, id)
        .await?
        .filter(|t| holder.sees(t))
        .ok_or(TaskError::NotFound(id))
}

/// An account's task `id`, of either mode (the dashboard shows both).
pub async fn find_in_account(
    app: &AppState,
    account: AccountId,
    id: TaskId,
) -> Result<TaskRecord, TaskError> {
    app.store
        .get_task_by_id(id)
        .await?
        .filter(|t| t.account_id == account)
        .ok_or(TaskError::NotFound(id))
}

/// A page of tasks, and whether more follow it. `query` asks for one more
/// than the page holds (the doors' list filters make it so).
pub async fn list(app: &AppState, query: &TaskQuery) -> Result<(Vec<TaskRecord>, bool), TaskError> {
    let page = (query.limit - 1) as usize;
    let mut rows = app.store.list_tasks(query).await?;
    let more = rows.len() > page;
    rows.truncate(page);
    Ok((rows, more))
}

/// Cancels a queued or running task, stops its execution and answers
/// whoever waits for it. The cancelled task.
pub async fn cancel(
    app: &AppState,
    holder: Holder<'_>,
    id: TaskId,
) -> Result<TaskRecord, TaskError> {
    if holder.apis.is_some() {
        // Another API's task is not this caller's to see, nor to cancel.
        find(app, holder, id).await?;
    }
    let task = app
        .store
        .cancel_task(holder.account, holder.mode, id, app.clock.now())
        .await?
        .ok_or(TaskError::NotFound(id))?;
    if task.status != TaskStatus::Cancelled {
        return Err(TaskError::NotCancellable(task.status));
    }
    app.executor.cancel_running(task.id);
    app.executor.notify(&task);
    // Cancelled while queued here: its span ends now (a running task's
    // ends with its run).
    app.telemetry
        .tasks
        .ended_unrun(task.id, TaskStatus::Cancelled);
    Ok(task)
}

/// Cancels the task of a request whose client left before its answer (the
/// handler or the streamed body was dropped): its upstream work stops.
pub struct CancelOnDrop {
    app: Arc<AppState>,
    account_id: AccountId,
    mode: Mode,
    id: TaskId,
    armed: bool,
}

impl CancelOnDrop {
    pub fn new(app: &Arc<AppState>, principal: &Principal, id: TaskId) -> Self {
        Self {
            app: app.clone(),
            account_id: principal.account_id,
            mode: principal.mode,
            id,
            armed: true,
        }
    }

    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (app, account_id, mode, id) = (self.app.clone(), self.account_id, self.mode, self.id);
        runtime.spawn(async move {
            match cancel(&app, Holder::account(account_id, mode), id).await {
                Ok(_) => tracing::debug!(task = %id, "the client left: its task is cancelled"),
                // It ended meanwhile: nothing to stop.
                Err(TaskError::NotCancellable(_) | TaskError::NotFound(_)) => {}
                Err(e) => tracing::warn!(task = %id, error = %e, "cannot cancel a left task"),
            }
        });
    }
}
