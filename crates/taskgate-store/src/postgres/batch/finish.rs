//! Many ends of running tasks in one statement, with the spend they move.

use std::collections::HashSet;
use std::sync::LazyLock;

use sqlx::PgConnection;
use taskgate_core::{TaskId, TaskStatus};

use super::Work;
use super::insert::text;
use crate::TaskFinish;

/// The finishes of `works`, in groups written by one statement each: all
/// of them, or one by one, as sent, if a task is finished twice.
pub(super) fn finish_groups(works: &[&Work]) -> Vec<Vec<usize>> {
    let finishes: Vec<usize> = (0..works.len())
        .filter(|&i| matches!(works[i], Work::Finish { .. }))
        .collect();
    let ids: HashSet<TaskId> = finishes.iter().map(|&i| finish_of(works[i]).0).collect();
    if finishes.is_empty() {
        Vec::new()
    } else if ids.len() == finishes.len() {
        vec![finishes]
    } else {
        finishes.into_iter().map(|i| vec![i]).collect()
    }
}

pub(super) fn finish_of(work: &Work) -> (TaskId, &TaskFinish) {
    match work {
        Work::Finish { id, finish } => (*id, &**finish),
        _ => unreachable!("a finish"),
    }
}

/// Many ends of running tasks in one statement, with the spend they move
/// (what [`crate::sql::Statements`]'s `ending`, [`crate::sql::RELEASE_SPEND`]
/// and [`crate::sql::UPSERT_SPEND`] do one by one); the tasks that were
/// still running.
pub(super) async fn finish_many(
    conn: &mut PgConnection,
    list: &[(TaskId, &TaskFinish)],
) -> Result<HashSet<TaskId>, sqlx::Error> {
    fn column<T>(list: &[(TaskId, &TaskFinish)], f: impl Fn(&TaskFinish) -> T) -> Vec<T> {
        list.iter().map(|(_, x)| f(x)).collect()
    }
    let ids: Vec<(TaskId,)> = sqlx::query_as(FINISH_MANY.as_str())
        .bind(
            list.iter()
                .map(|(id, _)| id.to_string())
                .collect::<Vec<_>>(),
        )
        .bind(column(list, |f| text(&f.status)))
        .bind(column(list, |f| f.output.clone()))
        .bind(column(list, |f| f.error.as_ref().map(text)))
        .bind(column(list, |f| f.units))
        .bind(column(list, |f| f.input_tokens))
        .bind(column(list, |f| f.output_tokens))
        .bind(column(list, |f| f.cost_micros))
        .bind(column(list, |f| text(&f.attempts)))
        .bind(column(list, |f| f.completed_at.unix_ms()))
        .bind(column(list, |f| text(&f.event())))
        .bind(column(list, |f| f.charge_account.map(|a| a.to_string())))
        .bind(column(list, |f| f.completed_at.month_key()))
        .bind(column(list, |_| text(&TaskStatus::Running)))
        .bind(column(list, |f| f.reasoning_tokens))
        .bind(column(list, |f| f.cached_input_tokens))
        .fetch_all(&mut *conn)
        .await?;
    Ok(ids.into_iter().map(|(id,)| id).collect())
}

/// Ends running tasks from one array per column, and moves their spend: a
/// reservation given back in the month the task was created, a cost
/// charged in the month it completed. Both are summed per account and
/// month, so each row changes once (a row cannot change twice in one
/// statement), in key order, so that concurrent writers lock rows in one
/// order. A reservation's month has its row already.
///
/// The deliveries of their webhooks are written by the same statement.
///
/// The state each task must be in comes as a column (`was`), not a
/// constant: with `status = 'running'` the planner may scan every running
/// task (dead index entries included) and hash them, instead of looking
/// each task up by its key.
static FINISH_MANY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH ended AS (\
     UPDATE tasks SET status = u.status, output = u.output, error = u.error, units = u.units, \
     input_tokens = u.input_tokens, output_tokens = u.output_tokens, cost_micros = u.cost_micros, \
     reasoning_tokens = u.reasoning_tokens, cached_input_tokens = u.cached_input_tokens, \
     attempts = u.attempts, completed_at = u.completed_at, lease_until = NULL, \
     events = (tasks.events::jsonb || jsonb_build_array(u.event::jsonb))::text \
     FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], \
     $7::bigint[], $8::bigint[], $9::text[], $10::bigint[], $11::text[], $12::text[], $13::text[], \
     $14::text[], $15::bigint[], $16::bigint[]) AS u(id, status, output, error, units, input_tokens, \
     output_tokens, cost_micros, attempts, completed_at, event, charge_account, charge_month, was, \
     reasoning_tokens, cached_input_tokens) \
     WHERE tasks.id = u.id AND tasks.status = u.was \
     RETURNING tasks.id, tasks.account_id, tasks.reserved_micros, tasks.created_at, \
     u.charge_account, u.charge_month, u.cost_micros, tasks.mode, u.status AS ended_status, \
     u.completed_at AS ended_at), \
     moves (account_id, month, released, charged) AS (\
     SELECT account_id, to_char(timestamp 'epoch' + created_at * interval '1 millisecond', 'YYYY-MM'), \
     reserved_micros, 0 FROM ended WHERE reserved_micros > 0 \
     UNION ALL SELECT charge_account, charge_month, 0, cost_micros FROM ended \
     WHERE charge_account IS NOT NULL AND cost_micros > 0), \
     sums AS (SELECT account_id, month, SUM(released)::bigint AS released, \
     SUM(charged)::bigint AS charged FROM moves GROUP BY account_id, month), \
     spend AS (INSERT INTO account_spend AS s (account_id, month, micros) \
     SELECT account_id, month, charged FROM sums ORDER BY account_id, month \
     ON CONFLICT (account_id, month) DO UPDATE SET micros = s.micros + excluded.micros, \
     reserved = GREATEST(s.reserved - (SELECT released FROM sums \
     WHERE sums.account_id = excluded.account_id AND sums.month = excluded.month), 0)), \
     hooks AS ({}) SELECT id FROM ended",
        crate::webhooks::enqueue_from(
            "(SELECT id, account_id, mode, 'task.' || ended_status AS event, ended_at AS at \
             FROM ended)"
        )
    )
});
