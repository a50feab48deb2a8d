//! `ingot`: a thin command line over the project's libraries.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ingot",
    version,
    about = "DeepSeek-V2-class GGUF decoder with Rust-authored CUDA kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a deterministic synthetic deepseek2 GGUF model.
    Synth(cmd::synth::Args),
    /// Print a GGUF file's metadata, tensor table and derived model config.
    Inspect(cmd::inspect::Args),
    /// Generate text from a prompt, streamed to stdout.
    Run(cmd::run::Args),
    /// Serve the model over an OpenAI-compatible HTTP API (chat and text completions, streaming,
    /// metrics).
    Serve(cmd::serve::Args),
    /// Decode from the small trained model compiled into ingot (Rust-like text; `--synthetic`: the
    /// random one).
    Demo(cmd::demo::Args),
    /// Decode with a device backend beside the CPU oracle; fails when they disagree.
    Gate(cmd::gate::Args),
    /// Measure decode tokens/s at given cache depths (llama-bench style table).
    Bench(cmd::bench::Args),
    /// The decode plan as a table of simulator counts; `--predict CARD` adds a predicted time.
    Plan(cmd::plan::Args),
    /// Copy a model keeping a subset (or a permutation) of its routed experts.
    Slice(cmd::slice::Args),
    /// Replay an expert cache over a routing trace: hit rates, PCIe bytes and predicted speed per
    /// policy.
    Replay(cmd::replay::Args),
}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Synth(a) => cmd::synth::run(a),
        Command::Inspect(a) => cmd::inspect::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Gate(a) => cmd::gate::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Slice(a) => cmd::slice::run(a),
        Command::Replay(a) => cmd::replay::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`ingot inspect f | head`) is the reader's choice, not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes on one line, outermost first, skipping a cause whose text the
/// previous message already contains (library errors often embed their source).
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out.replace('\n', " ")
}

/// Keeps freed heap memory in the process instead of returning it to the kernel: a prefill chunk
/// allocates and frees megabytes of activations per layer, and with glibc's defaults (blocks from
/// 128 KiB on mapped afresh, heap tops trimmed) every one of them came back as fresh pages, each
/// zeroed by a page fault: 69K faults and ~10% of a single-thread pp64's CPU time on lite-4l
/// (`perf stat -e page-faults`), 6.5K with these settings. The price is a peak heap that is not
/// handed back until exit.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() {
    // glibc's largest mmap threshold on 64-bit (32 MiB); a trim threshold that is never reached.
    // SAFETY: mallopt only changes the allocator's parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_memory() {}
