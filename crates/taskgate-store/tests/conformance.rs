//! The store conformance suite: every check runs against SQLite and against
//! PostgreSQL, so the two backends cannot drift apart.
//!
//! Each check is an `async fn(Arc<dyn Store>)` in one of the modules below; the
//! `conformance!` macro turns the list of checks into one `#[tokio::test]` per
//! check and backend (`sqlite::accounts::create_get_list_count`,
//! `postgres::accounts::create_get_list_count`, …). The harness gives every test
//! a fresh, migrated store of its own.
//!
//! SQLite uses a temporary file. PostgreSQL uses a fresh database on the server
//! named by `TASKGATE_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); without a server the PostgreSQL
//! tests print `SKIPPED: …` and pass, unless `CI=true`, where they fail.

#[path = "conformance/harness.rs"]
mod harness;

#[path = "conformance/fixtures.rs"]
mod fixtures;

#[path = "conformance/accounts.rs"]
mod accounts;
#[path = "conformance/audit.rs"]
mod audit;
#[path = "conformance/concurrency.rs"]
mod concurrency;
#[path = "conformance/corrupt.rs"]
mod corrupt;
#[path = "conformance/idempotency.rs"]
mod idempotency;
#[path = "conformance/keys.rs"]
mod keys;
#[path = "conformance/lifecycle.rs"]
mod lifecycle;
/// PostgreSQL only: how the writers' statements are planned.
#[path = "conformance/plans.rs"]
mod plans;
#[path = "conformance/tasks.rs"]
mod tasks;
#[path = "conformance/transitions.rs"]
mod transitions;
#[path = "conformance/unavailable.rs"]
mod unavailable;
#[path = "conformance/untold.rs"]
mod untold;
#[path = "conformance/usage.rs"]
mod usage;
#[path = "conformance/users.rs"]
mod users;
#[path = "conformance/webhooks.rs"]
mod webhooks;

/// One test per backend and check. A check named here runs on every backend.
macro_rules! conformance {
    ($($module:ident: [$($check:ident),* $(,)?]),* $(,)?) => {
        conformance!(@backend sqlite; $($module: [$($check),*]),*);
        conformance!(@backend postgres; $($module: [$($check),*]),*);
    };
    (@backend $backend:ident; $($module:ident: [$($check:ident),*]),*) => {
        mod $backend {
            $(
                mod $module {
                    $(
                        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                        async fn $check() {
                            crate::harness::$backend(crate::$module::$check).await;
                        }
                    )*
                }
            )*
        }
    };
}

conformance! {
    accounts: [
        create_get_list_count,
        update_keeps_absent_fields,
        spend_ceiling,
    ],
    keys: [
        create_get_find_list,
        revoke_keeps_first_time,
        roll_caps_old_expiry,
        roll_refuses_revoked_and_unknown,
        roll_is_atomic,
        touch_only_moves_forward,
        pages_and_counts_of_one_mode,
    ],
    tasks: [
        insert_and_get_scoped,
        list_filters,
        list_bounds_order_limit,
        queued_ids_oldest_first,
        list_by_allowed_apis,
        queued_tasks_take_turns,
    ],
    lifecycle: [
        claim_only_once,
        finish_only_from_running,
        usage_counts_round_trip_every_way_a_task_ends,
        finish_charges_spend,
        finish_after_cancel_is_dropped,
        cancel_transitions,
        renew_counts_own_running_tasks,
        interrupt_expired_and_dead_runner,
        reservations_hold_the_limit_and_are_settled,
        capped_inserts_and_claims_hold_the_cap,
        caps_count_each_mode_apart,
        purge_removes_old_ended_tasks_only,
        purge_of_one_mode_leaves_the_other,
    ],
    untold: [
        every_read_finds_it,
        ends_with_every_event,
        cancel_and_sweeper_find_it,
        caps_count_it,
        usage_counts_it,
    ],
    transitions: [
        every_forbidden_transition_is_refused,
        finish_to_a_non_ending_state_is_refused,
    ],
    idempotency: [
        begin_outcomes,
        abandon_frees_in_progress_only,
        expired_records_restart,
        stale_records_taken_over_once,
        purge_removes_old_records,
        records_are_fenced_by_their_owner,
    ],
    usage: [
        request_counts_add_up_in_buckets,
        task_counts_and_durations,
    ],
    users: [
        one_user_per_email,
        disabling_and_new_passwords_end_sessions,
        sessions_are_found_touched_and_purged,
    ],
    concurrency: [
        concurrent_begin_starts_once,
        concurrent_stale_takeover_once,
        concurrent_claim_once,
        concurrent_finish_once,
        concurrent_reservations_never_overshoot,
        concurrent_writes_each_commit,
        a_failing_write_fails_alone,
        concurrent_capped_starts_never_overshoot,
    ],
    webhooks: [
        endpoints_are_kept_per_account_and_mode,
        an_endpoint_that_keeps_failing_is_disabled,
        signing_secrets_are_made_once_and_rotate,
        every_change_of_a_task_writes_its_deliveries,
        senders_hold_deliveries_under_a_lease,
        tests_and_deletes_and_purges,
        claims_take_turns_per_destination,
        a_claim_reads_what_its_attempt_needs,
        fresh_deliveries_go_to_the_sender_in_their_commit,
        senders_hear_of_deliveries_as_they_are_written,
        deliveries_handed_over_are_the_same_deliveries,
    ],
    audit: [
        every_change_appends_one_chained_event,
        a_change_that_fails_writes_no_event,
        lists_filter_by_account_action_and_time,
        concurrent_appends_make_one_chain,
        retention_keeps_the_rest_verifiable,
    ],
}

/// Checks that also open the database beside the store.
mod raw {
    /// `audit_verify_…`: an edited, deleted or undecodable event, on each
    /// backend.
    macro_rules! audit_raw {
        ($($check:ident),*) => {
            mod audit_sqlite {
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $check() {
                        crate::harness::sqlite_with_url(crate::audit::$check).await;
                    }
                )*
            }
            mod audit_postgres {
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $check() {
                        crate::harness::postgres_with_url(crate::audit::$check).await;
                    }
                )*
            }
        };
    }
    audit_raw!(
        verify_names_an_edited_event,
        verify_names_the_event_after_a_deleted_one,
        verify_names_an_event_that_no_longer_decodes
    );

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_the_dispatchers_poll_reads_only_the_queued_index() {
        crate::harness::sqlite_with_url(
            crate::plans::sqlite_the_dispatchers_poll_reads_only_the_queued_index,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_corrupt_values_name_their_column() {
        crate::harness::sqlite_with_url(crate::corrupt::corrupt_values_name_their_column).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_concurrent_claims_never_take_one_delivery_twice() {
        crate::harness::postgres_with_url(
            crate::webhooks::concurrent_claims_never_take_one_delivery_twice,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_corrupt_values_name_their_column() {
        crate::harness::postgres_with_url(crate::corrupt::corrupt_values_name_their_column).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_finishes_look_tasks_up_by_key_as_the_table_grows() {
        crate::harness::postgres_with_url(
            crate::plans::finishes_look_tasks_up_by_key_as_the_table_grows,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_copies_the_wal_into_the_database_beside_the_writer() {
        crate::harness::sqlite_with_url(
            crate::plans::sqlite_copies_the_wal_into_the_database_beside_the_writer,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_the_wal_stays_bounded_under_steady_writes() {
        crate::harness::sqlite_with_url(
            crate::plans::sqlite_the_wal_stays_bounded_under_steady_writes,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_a_sync_calls_task_is_written_with_its_end() {
        crate::harness::sqlite_with_url(
            crate::plans::sqlite_a_sync_calls_task_is_written_with_its_end,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_at_most_64_tasks_are_held() {
        crate::harness::sqlite_with_url(crate::plans::sqlite_at_most_64_tasks_are_held).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_driver_errors_are_classified() {
        crate::harness::sqlite_with_url(crate::unavailable::driver_errors_are_classified).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_driver_errors_are_classified() {
        crate::harness::postgres_with_url(crate::unavailable::driver_errors_are_classified).await;
    }

    /// On one thread: a write that waited for SQLite's lock there would stop
    /// everything else.
    #[tokio::test(flavor = "current_thread")]
    async fn sqlite_a_locked_database_never_blocks_the_callers_thread() {
        crate::harness::sqlite_with_url(
            crate::plans::sqlite_a_locked_database_never_blocks_the_callers_thread,
        )
        .await;
    }

    /// The data directory is made 0700 and the database and its `-wal` and
    /// `-shm` 0600 (they hold inputs, outputs and password hashes); files an
    /// older version left open to others are closed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let dir = std::env::temp_dir().join(format!(
            "taskgate_files_{}",
            crate::harness::unique_suffix()
        ));
        let db = dir.join("data").join("taskgate.db");
        let url = format!("sqlite://{}", db.display());
        let store = taskgate_store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        crate::fixtures::new_account(&*store, "files").await;
        assert_eq!(mode(db.parent().unwrap()), 0o700);
        for suffix in ["", "-wal", "-shm"] {
            let mut f = db.clone().into_os_string();
            f.push(suffix);
            assert_eq!(mode(std::path::Path::new(&f)), 0o600, "{suffix}");
        }
        drop(store);
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        let store = taskgate_store::connect(&url).await.unwrap();
        assert_eq!(mode(&db), 0o600, "tightened at the next start");
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
