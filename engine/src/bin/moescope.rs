//! The `moescope` command line: other tools call it, so its interface is a contract.
//! Today: `adapter` and `bench kernels`; generate, accuracy and rack land with their issues.

// Printing results is this binary's whole job.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use moescope_engine::{bench, gpu::GpuContext};

#[derive(Parser)]
#[command(
    name = "moescope",
    version,
    about = "MoEscope: the engine behind the explorer"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the GPU adapter MoEscope would use, as JSON.
    Adapter,
    /// Benchmarks on this machine's GPU (times are measured, never asserted).
    Bench {
        /// Which suite to run.
        suite: Suite,
        /// Size of each benchmark buffer in MiB.
        #[arg(long, default_value_t = 256)]
        mib: u64,
        /// Timed dispatches per kernel.
        #[arg(long, default_value_t = 20)]
        iterations: u32,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Suite {
    /// gemv and the vec4 copy: achieved memory bandwidth, gemv checked against the reference.
    Kernels,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("moescope: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    let ctx = pollster::block_on(GpuContext::new()).map_err(|e| e.to_string())?;
    match cli.command {
        Command::Adapter => {
            println!("{}", to_json(&ctx.adapter)?);
        }
        Command::Bench {
            suite: Suite::Kernels,
            mib,
            iterations,
            json,
        } => {
            let report = pollster::block_on(bench::bandwidth(&ctx, mib, iterations))
                .map_err(|e| e.to_string())?;
            if json {
                println!("{}", to_json(&report)?);
            } else {
                print_bandwidth(&report);
            }
            if let Some(bad) = report.gemv.iter().find(|g| !g.passed) {
                let what = format!("gemv (lanes {}) against the reference", bad.lanes);
                return Err(bad.comparison.describe(&what));
            }
        }
    }
    Ok(())
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, String> {
    serde_json::to_string_pretty(value).map_err(|e| e.to_string())
}

fn print_bandwidth(r: &bench::BandwidthReport) {
    println!(
        "adapter: {} ({}, {})",
        r.adapter.name, r.adapter.backend, r.adapter.driver
    );
    println!("timing: {:?}", r.copy_vec4.source);
    println!(
        "{:<16} {:>12} {:>14} {:>10} {:>10}",
        "kernel", "bytes", "us/dispatch", "GB/s", "check"
    );
    let t = &r.copy_vec4;
    println!(
        "{:<16} {:>12} {:>14.1} {:>10.1}",
        "copy_vec4", t.bytes_moved, t.per_dispatch_us, t.gb_per_s
    );
    for g in &r.gemv {
        let t = &g.time;
        println!(
            "{:<16} {:>12} {:>14.1} {:>10.1} {:>10}",
            format!("gemv lanes={}", g.lanes),
            t.bytes_moved,
            t.per_dispatch_us,
            t.gb_per_s,
            if g.passed { "ok" } else { "MISMATCH" }
        );
    }
    if let Some(g) = r.gemv.first() {
        println!(
            "gemv {}x{}; best gemv/copy bandwidth {:.3}",
            g.m, g.k, r.best_gemv_over_copy
        );
    }
}
