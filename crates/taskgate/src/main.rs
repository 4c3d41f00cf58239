//! The `taskgate` binary: parses the command line, loads the configuration,
//! and calls the library.

mod audit;
mod cli;
mod operator;

use std::process::ExitCode;

use clap::Parser;

/// jemalloc instead of the C library's allocator. Under load glibc's malloc
/// spread the many small, short-lived allocations of requests (hyper's
/// buffers, futures, JSON) over one arena per thread and kept what each had
/// held; with 1,000 requests in flight its locking and page faults took a
/// third of the throughput (bench/RESULTS.md). The settings are compiled in
/// (`.cargo/config.toml`): one arena per CPU, pages unused for 200 ms given
/// back by a background thread.
///
/// It is built unprefixed, so it is also the `malloc` of the C code linked
/// in: SQLite's page caches and statements. With glibc's malloc left to
/// SQLite, each thread that committed or read (the runtime's workers, the
/// writer, the blocking pool's readers) got an arena of its own, 13 MB in
/// seven arenas after a run at 64 connections (bench/RESULTS.md).
#[cfg(unix)]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
