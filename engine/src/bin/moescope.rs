//! The `moescope` command line: other tools call it, so its interface is a contract.
//! Today: `adapter`, `bench kernels`, `generate` and `rack eval|sweep|waterfall|calibrate`.

// Printing results is this binary's whole job.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use std::io::Write;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use moescope_engine::kernels::gemv::GemvVariant;
use moescope_engine::model::accumulation;
use moescope_engine::model::accuracy;
use moescope_engine::model::generate::{self, Engine, GenerateOptions, Sampling};
use moescope_engine::model::{tokenizer, MoeConfig, Weights};
use moescope_engine::plan::Optimizations;
use moescope_engine::quant::Format;
use moescope_engine::rack::{self, calibrate};
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
    Bench(BenchArgs),
    /// Generate text with deepseek-mini (greedy unless a temperature is given).
    Generate(GenerateArgs),
    /// A lesson computed from the model: `accumulation` sums the same FP8 dot products in f16,
    /// in f32 and in f16 promoted to f32 every 128 elements (CPU).
    Lesson {
        #[arg(value_enum)]
        lesson: LessonArg,
        /// Seeds the synthetic weights (without --weights).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// A safetensors weight file (default: synthetic weights from --seed).
        #[arg(long)]
        weights: Option<std::path::PathBuf>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// What a weight format costs in accuracy against f32 over the fixed prompt set (GPU).
    Accuracy {
        /// The weight format of the block projections.
        #[arg(long, value_parser = parse_format)]
        format: Format,
        /// How the routed experts' inputs travel (fp8: E4M3 records, 1x128 tiles).
        #[arg(long, value_enum, default_value = "f32")]
        dispatch: DispatchArg,
        /// Seeds the synthetic weights (without --weights).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// A safetensors weight file (default: synthetic weights from --seed).
        #[arg(long)]
        weights: Option<std::path::PathBuf>,
        /// Print JSON instead of a line of text.
        #[arg(long)]
        json: bool,
    },
    /// Held-out loss and perplexity per byte of a weight format over windows of a text file
    /// (GPU; train/corpus.py writes the held-out text to train/data/val.txt).
    Perplexity {
        /// The weight format of the block projections.
        #[arg(long, value_parser = parse_format, default_value = "f32")]
        format: Format,
        /// How the routed experts' inputs travel (fp8: E4M3 records, 1x128 tiles).
        #[arg(long, value_enum, default_value = "f32")]
        dispatch: DispatchArg,
        /// A safetensors weight file (default: synthetic weights from --seed).
        #[arg(long)]
        weights: Option<std::path::PathBuf>,
        /// Seeds the synthetic weights (without --weights).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The text to score.
        #[arg(long)]
        text: std::path::PathBuf,
        /// Bytes predicted per window (each window is read from an empty cache).
        #[arg(long, default_value_t = 512)]
        window: usize,
        /// Windows, evenly spaced over the text.
        #[arg(long, default_value_t = 32)]
        windows: usize,
        /// Print JSON instead of a line of text.
        #[arg(long)]
        json: bool,
    },
    /// Which kinds of byte each routed expert takes, over windows of a text file (CPU
    /// reference routing).
    Experts {
        /// A safetensors weight file (default: synthetic weights from --seed).
        #[arg(long)]
        weights: Option<std::path::PathBuf>,
        /// Seeds the synthetic weights (without --weights).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The text to route.
        #[arg(long)]
        text: std::path::PathBuf,
        /// Bytes per window.
        #[arg(long, default_value_t = 256)]
        window: usize,
        /// Windows, evenly spaced over the text.
        #[arg(long, default_value_t = 16)]
        windows: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The rack model: estimates for a scenario file (TOML or JSON), and its calibration.
    Rack {
        #[command(subcommand)]
        command: RackCommand,
    },
}

#[derive(Subcommand)]
enum RackCommand {
    /// Evaluate one scenario: one JSON object.
    Eval { scenario: String },
    /// The scenario over concurrency: a JSON array of points (the Pareto curve).
    Sweep {
        scenario: String,
        /// Points in the sweep.
        #[arg(long, default_value_t = 32)]
        points: usize,
    },
    /// Add the scenario's optimizations one at a time: a JSON array, one entry each.
    Waterfall { scenario: String },
    /// Fit the efficiency parameters to the public figures and show every residual.
    Calibrate {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Write the fit to engine/src/rack/fitted.json (where the app loads it from).
        #[arg(long)]
        write: bool,
        /// Only report the committed fit's residuals; do not refit.
        #[arg(long)]
        check: bool,
        /// Print the residual and validation tables of docs/RACK_MODEL.md (Markdown).
        #[arg(long)]
        markdown: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum LessonArg {
    /// FP8 dot products accumulated in f16, f32, and f16 promoted every 128 elements.
    Accumulation,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    Gpu,
    Cpu,
}

/// How the routed experts' inputs travel from the dispatch.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DispatchArg {
    F32,
    Fp8,
}

#[derive(Clone, Copy, ValueEnum)]
enum Suite {
    /// The decode step with all switches off, each switch alone, and all on: time, kernels,
    /// submissions and bytes per step, per-kernel GPU times, logits checked against the baseline.
    Decode,
    /// gemv and the vec4 copy: achieved memory bandwidth, gemv checked against the reference.
    Kernels,
    /// The rack model's speed (CPU only): eval and a 64-point sweep of every scenario in
    /// scenarios/.
    Rack,
    /// Every weight format, all switches on: decode time per step, bytes, model size and the
    /// accuracy against f32.
    Formats,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Invalid(message)) => {
            eprintln!("moescope: {message}");
            // As for a bad argument (clap): the input is wrong, not the program.
            ExitCode::from(2)
        }
        Err(Failure::Other(message)) => {
            eprintln!("moescope: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Why a command failed: an invalid input (a scenario; exit 2), or anything else (exit 1).
enum Failure {
    Invalid(String),
    Other(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Other(message)
    }
}

impl From<Failure> for String {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Invalid(m) | Failure::Other(m) => m,
        }
    }
}

/// The decode-step benchmarks' options (suites decode and formats), on synthetic weights seed 0.
fn decode_options(
    prompt_tokens: usize,
    steps: usize,
    rounds: usize,
) -> bench::decode::DecodeBenchOptions {
    bench::decode::DecodeBenchOptions {
        prompt_tokens,
        steps,
        rounds,
        seed: 0,
    }
}

fn gpu_context() -> Result<GpuContext, String> {
    pollster::block_on(GpuContext::new()).map_err(|e| e.to_string())
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Adapter => {
            let ctx = gpu_context()?;
            println!("{}", to_json(&ctx.adapter)?);
        }
        Command::Bench(args) => run_bench(args)?,
        Command::Generate(args) => run_generate(args)?,
        Command::Lesson {
            lesson: LessonArg::Accumulation,
            seed,
            weights,
            json,
        } => run_lesson(seed, weights, json)?,
        Command::Accuracy {
            format,
            dispatch,
            seed,
            weights,
            json,
        } => run_accuracy(format, dispatch, seed, weights, json)?,
        Command::Perplexity {
            format,
            dispatch,
            weights,
            seed,
            text,
            window,
            windows,
            json,
        } => {
            let weights = load_weights(weights.as_deref(), seed)?;
            let windows = read_windows(&text, window, windows, &weights)?;
            let ctx = gpu_context()?;
            let run = (format, dispatch == DispatchArg::Fp8);
            let h = pollster::block_on(accuracy::held_out(&ctx, &weights, run, &windows))
                .map_err(|e| e.to_string())?;
            print_result(json, &h, |h| {
                format!(
                    "{}{}: held-out loss {:.4} nats/byte, perplexity {:.4} per byte, {:.4} bits/byte ({} windows, {} bytes predicted)",
                    h.format.name(),
                    if h.dispatch_fp8 { " + FP8 dispatch" } else { "" },
                    h.loss,
                    h.perplexity,
                    h.bits_per_byte,
                    h.windows,
                    h.predictions
                )
            })?;
        }
        Command::Experts {
            weights,
            seed,
            text,
            window,
            windows,
            json,
        } => run_experts(
            &load_weights(weights.as_deref(), seed)?,
            &text,
            window,
            windows,
            json,
        )?,
        Command::Rack { command } => run_rack(command)?,
    }
    Ok(())
}

/// `moescope lesson accumulation`: the same FP8 dot products summed three ways.
fn run_lesson(seed: u64, weights: Option<std::path::PathBuf>, json: bool) -> Result<(), String> {
    let weights = load_weights(weights.as_deref(), seed)?;
    let lesson =
        accumulation::run(&weights, &[256, 1024, 4096, 16384], 64).map_err(|e| e.to_string())?;
    if json {
        println!("{}", to_json(&lesson)?);
    } else {
        println!("activations: {}", lesson.activations);
        println!(
            "error |sum - exact| / sum|products|: mean (max); [median of |sum - exact| / |exact|]"
        );
        print!("{:>7} {:>6}", "K", "dots");
        for a in accumulation::Accumulator::ALL {
            print!(" {:>34}", a.name());
        }
        println!();
        for row in &lesson.rows {
            print!("{:>7} {:>6}", row.k, row.dot_products);
            for e in &row.errors {
                print!(
                    " {:>34}",
                    format!(
                        "{:.1e} ({:.1e}) [{:.1e}]",
                        e.mean_relative_error,
                        e.max_relative_error,
                        e.median_error_relative_to_result
                    )
                );
            }
            println!();
        }
    }
    Ok(())
}

/// `moescope accuracy`: a weight format against f32 on the fixed prompts.
fn run_accuracy(
    format: Format,
    dispatch: DispatchArg,
    seed: u64,
    weights: Option<std::path::PathBuf>,
    json: bool,
) -> Result<(), String> {
    let weights = load_weights(weights.as_deref(), seed)?;
    let ctx = gpu_context()?;
    let fp8 = dispatch == DispatchArg::Fp8;
    let a = pollster::block_on(accuracy::measure(&ctx, &weights, format, fp8))
        .map_err(|e| e.to_string())?;
    print_result(json, &a, |a| {
        format!(
            "{}{}: top-1 agreement {:.4}, KL {:.3e} nats, max logit error {:.3e}, {:.4} bytes/parameter, model {:.2} MB ({} positions)",
            a.format.name(),
            if a.dispatch_fp8 { " + FP8 dispatch" } else { "" },
            a.top1_agreement,
            a.kl_divergence,
            a.max_logit_error,
            a.bytes_per_parameter,
            a.model_bytes as f64 / 1e6,
            a.positions
        )
    })?;
    Ok(())
}

/// `moescope bench SUITE`: runs the suite and prints its report.
fn run_bench(args: BenchArgs) -> Result<(), String> {
    let BenchArgs {
        suite,
        prompt_tokens,
        steps,
        rounds,
        mib,
        iterations,
        formats,
        variant,
        json,
    } = args;
    match suite {
        Suite::Decode => {
            let ctx = gpu_context()?;
            let options = decode_options(prompt_tokens, steps, rounds);
            let report =
                pollster::block_on(bench::decode::run(&ctx, options)).map_err(|e| e.to_string())?;
            if json {
                println!("{}", to_json(&report)?);
            } else {
                print_decode(&report);
            }
        }
        Suite::Kernels => bench_kernels(mib, iterations, formats, variant, json)?,
        Suite::Rack => bench_rack(iterations, json)?,
        Suite::Formats => {
            let ctx = gpu_context()?;
            let options = decode_options(prompt_tokens, steps, rounds);
            let report = pollster::block_on(bench::formats::run(&ctx, options))
                .map_err(|e| e.to_string())?;
            if json {
                println!("{}", to_json(&report)?);
            } else {
                print_formats(&report);
            }
        }
    }
    Ok(())
}

/// `moescope bench kernels`: the gemv of each format against the copy, every result checked.
fn bench_kernels(
    mib: u64,
    iterations: u32,
    formats: Vec<Format>,
    variant: GemvVariant,
    json: bool,
) -> Result<(), String> {
    let ctx = gpu_context()?;
    let formats = if formats.is_empty() {
        Format::ALL.to_vec()
    } else {
        formats
    };
    let report = pollster::block_on(bench::bandwidth(&ctx, mib, iterations, &formats, variant))
        .map_err(|e| e.to_string())?;
    if json {
        println!("{}", to_json(&report)?);
    } else {
        print_bandwidth(&report);
    }
    let all = report
        .gemv
        .iter()
        .chain(report.formats.iter().map(|f| &f.best));
    if let Some(bad) = all.into_iter().find(|g| !g.passed) {
        let what = format!(
            "gemv ({}, lanes {}) against the reference",
            bad.format.name(),
            bad.lanes
        );
        return Err(bad.comparison.describe(&what));
    }
    Ok(())
}

/// `moescope bench rack`: how long the rack model takes on every committed scenario.
fn bench_rack(iterations: u32, json: bool) -> Result<(), String> {
    let mut scenarios = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir("scenarios")
        .map_err(|e| format!("scenarios/: {e} (run from the repository root)"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml" || x == "json"))
        .collect();
    paths.sort();
    for path in paths {
        let name = path.to_string_lossy().into_owned();
        scenarios.push((name.clone(), load_scenario(&name)?));
    }
    let timing = bench::rack(&scenarios, iterations).map_err(|e| e.to_string())?;
    if json {
        println!("{}", to_json(&timing)?);
    } else {
        println!("{:<55} {:>10} {:>12}", "scenario", "eval µs", "sweep64 µs");
        for t in &timing {
            println!(
                "{:<55} {:>10.1} {:>12.1}",
                t.scenario, t.eval_us, t.sweep64_us
            );
        }
    }
    Ok(())
}

/// `--json`: the value as JSON; otherwise the one line `line` makes of it.
fn print_result<T: serde::Serialize>(
    json: bool,
    value: &T,
    line: impl FnOnce(&T) -> String,
) -> Result<(), String> {
    if json {
        println!("{}", to_json(value)?);
    } else {
        println!("{}", line(value));
    }
    Ok(())
}

/// `count` windows of `window + 1` bytes of a text file, for the model's context
/// (`accuracy::windows`).
fn read_windows(
    path: &std::path::Path,
    window: usize,
    count: usize,
    weights: &Weights,
) -> Result<Vec<Vec<u32>>, String> {
    if window > weights.config.max_seq_len {
        return Err(format!(
            "--window {window}: the model reads at most {} positions",
            weights.config.max_seq_len
        ));
    }
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let windows = accuracy::windows(&text, window, count);
    if windows.is_empty() {
        return Err(format!(
            "the text is shorter than one window of {window} bytes"
        ));
    }
    Ok(windows)
}

fn run_experts(
    weights: &Weights,
    text: &std::path::Path,
    window: usize,
    windows: usize,
    json: bool,
) -> Result<(), String> {
    use moescope_engine::model::experts::{specialization, ByteClass};
    use moescope_engine::model::reference::{forward, KvCache};
    let windows = read_windows(text, window, windows, weights)?;
    let (mut tokens, mut routing) = (Vec::new(), Vec::new());
    for w in &windows {
        let out =
            forward(weights, w, &mut KvCache::new(&weights.config)).map_err(|e| e.to_string())?;
        tokens.extend_from_slice(w);
        routing.extend(
            out.routing
                .into_iter()
                .map(|per_layer| per_layer.into_iter().map(|r| r.experts).collect::<Vec<_>>()),
        );
    }
    let s = specialization(&tokens, &routing, weights.config.routed_experts, 8);
    if json {
        println!("{}", to_json(&s)?);
        return Ok(());
    }
    let total = s.tokens.max(1) as f64;
    let overall: Vec<String> = ByteClass::ALL
        .iter()
        .zip(&s.overall)
        .map(|(c, n)| format!("{} {:.1}%", c.name(), 100.0 * *n as f64 / total))
        .collect();
    println!("{} tokens: {}", s.tokens, overall.join(", "));
    println!("{:>5} {:>6} {:>7}  favourite class: its share of the expert's tokens (of the text's), odds ratio", "layer", "expert", "tokens");
    for p in &s.experts {
        let fav = match p.favourite {
            Some((c, share, ratio)) => {
                let i = ByteClass::ALL.iter().position(|x| *x == c).unwrap_or(0);
                format!(
                    "{} {:.0}% ({:.0}%), x{ratio:.0}",
                    c.name(),
                    100.0 * share,
                    100.0 * s.overall[i] as f64 / total
                )
            }
            None => "none (takes the text's mix)".into(),
        };
        println!(
            "{:>5} {:>6} {:>7}  {fav}",
            p.layer + 1,
            format!("E{}", p.expert),
            p.tokens
        );
    }
    Ok(())
}

/// `moescope bench`: which suite, and the settings of each.
#[derive(clap::Args)]
struct BenchArgs {
    /// Which suite to run.
    #[arg(default_value = "decode")]
    suite: Suite,
    /// decode: tokens of context before the timed steps.
    #[arg(long, default_value_t = 64)]
    prompt_tokens: usize,
    /// decode: timed steps per variant per round.
    #[arg(long, default_value_t = 16)]
    steps: usize,
    /// decode: rounds (the variants take turns in each).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Size of each benchmark buffer in MiB.
    #[arg(long, default_value_t = 256)]
    mib: u64,
    /// Timed dispatches per kernel.
    #[arg(long, default_value_t = 20)]
    iterations: u32,
    /// kernels: the weight formats to measure, comma-separated (default: every one).
    #[arg(long, value_delimiter = ',', value_parser = parse_format)]
    formats: Vec<Format>,
    /// kernels: the kernel the formats stream through: auto (what the model runs), tile
    /// (gemv.wgsl) or wide (gemv_wide.wgsl, FP4 only).
    #[arg(long, default_value = "auto", value_parser = parse_gemv_variant)]
    variant: GemvVariant,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct GenerateArgs {
    /// The prompt (byte-level: any UTF-8 text).
    #[arg(long)]
    prompt: String,
    /// Tokens to generate.
    #[arg(long)]
    tokens: usize,
    /// Which engine runs the model.
    #[arg(long, value_enum, default_value = "gpu")]
    backend: BackendArg,
    /// Seeds the sampler and, without --weights, the synthetic weights.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Sample at this temperature (> 0) instead of greedy decoding.
    #[arg(long, allow_negative_numbers = true)]
    temperature: Option<f32>,
    /// With --temperature: keep the smallest set of tokens whose probability reaches this.
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// A safetensors weight file (default: synthetic weights from --seed).
    #[arg(long)]
    weights: Option<std::path::PathBuf>,
    /// Which kernels run (GPU): none (the eager baseline), all, or a comma-separated list of
    /// switches (see `moescope bench decode`).
    #[arg(long, default_value = "all", value_parser = parse_optimizations)]
    opt: Optimizations,
    /// The weight format of the block projections (GPU; quantized from the f32 weights at
    /// load).
    #[arg(long, default_value = "f32", value_parser = parse_format)]
    format: Format,
    /// How the routed experts' inputs travel: f32, or fp8 (E4M3 records with a power-of-two
    /// scale per 1x128 tile, as DeepSeek-V3's dispatch sends them).
    #[arg(long, value_enum, default_value = "f32")]
    dispatch: DispatchArg,
    /// Print one JSON object instead of streaming the text.
    #[arg(long)]
    json: bool,
}

fn parse_format(text: &str) -> Result<Format, String> {
    Format::parse(text).ok_or_else(|| {
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        format!("unknown format {text:?}; one of {}", names.join(", "))
    })
}

fn parse_gemv_variant(text: &str) -> Result<GemvVariant, String> {
    GemvVariant::parse(text).ok_or_else(|| {
        let names: Vec<&str> = GemvVariant::ALL.iter().map(|v| v.name()).collect();
        format!("unknown gemv variant {text:?}; one of {}", names.join(", "))
    })
}

fn load_weights(path: Option<&std::path::Path>, seed: u64) -> Result<Weights, String> {
    let config = MoeConfig::deepseek_mini();
    match path {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Weights::from_safetensors(&bytes, &config)
                .map_err(|e| format!("{}: {e}", path.display()))
        }
        None => Weights::synthetic(&config, seed).map_err(|e| e.to_string()),
    }
}

fn parse_optimizations(text: &str) -> Result<Optimizations, String> {
    Optimizations::parse(text).map_err(|e| e.to_string())
}

fn run_generate(a: GenerateArgs) -> Result<(), String> {
    let mut weights = load_weights(a.weights.as_deref(), a.seed)?;
    weights.config.dispatch_fp8 = a.dispatch == DispatchArg::Fp8;
    let mut engine = match a.backend {
        BackendArg::Cpu if a.format != Format::F32 => {
            return Err(format!(
                "--format {} runs on the GPU engine; the CPU reference computes in f32",
                a.format.name()
            ))
        }
        BackendArg::Cpu => Engine::cpu(weights),
        BackendArg::Gpu => Engine::gpu(Arc::new(gpu_context()?), &weights, a.opt, a.format)
            .map_err(|e| e.to_string())?,
    };
    let sampling = match a.temperature {
        None => Sampling::Greedy,
        Some(temperature) => Sampling::Temperature {
            temperature,
            top_p: a.top_p,
        },
    };
    let opts = GenerateOptions {
        max_new_tokens: a.tokens,
        sampling,
        seed: a.seed,
    };
    let prompt = tokenizer::encode(&a.prompt);
    let json = a.json;
    // Stream raw bytes: a multi-byte character arrives one token at a time.
    let mut stdout = std::io::stdout();
    let result = pollster::block_on(generate::generate(
        &mut engine,
        &prompt,
        opts,
        &mut |step| {
            if !json {
                let _ = stdout.write_all(&[step.token as u8]);
                let _ = stdout.flush();
            }
            true
        },
    ))
    .map_err(|e| e.to_string())?;
    if json {
        println!("{}", to_json(&result)?);
    } else {
        println!();
        eprintln!(
            "{} tokens on {} ({}, {} weights, optimizations: {}): {:.2} ms/step ({:.1} tokens/s), {:.0} kernels and {:.0} submissions/step, {:.2} MB/step; prefill {:.1} ms",
            result.tokens.len(),
            result.backend.name(),
            result.adapter,
            result.format.name(),
            result.optimizations.map_or("none (cpu)".into(), |o| o.label()),
            result.ms_per_step,
            result.tokens_per_s,
            result.kernels_per_step,
            result.submissions_per_step,
            result.bytes_per_step / 1e6,
            result.prefill_ms,
        );
        for tie in &result.near_ties {
            eprintln!(
                "near tie at step {} ({}): margin {:.2e}",
                tie.step, tie.kind, tie.margin
            );
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
    for c in &r.copies {
        let t = &c.time;
        println!(
            "{:<16} {:>12} {:>14.1} {:>10.1}  {:.0} MiB buffers{}",
            "copy_vec4",
            t.bytes_moved,
            t.per_dispatch_us,
            t.gb_per_s,
            c.mib,
            if t.gb_per_s == r.copy_vec4.gb_per_s {
                " (the ceiling: fastest)"
            } else {
                ""
            }
        );
    }
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
    println!(
        "{:<10} {:>7} {:>10} {:>12} {:>14} {:>10} {:>10} {:>8}",
        "format", "rows", "kernel", "MB streamed", "us/dispatch", "GB/s", "vs copy", "check"
    );
    for f in &r.formats {
        let (g, t) = (&f.best, &f.best.time);
        let kernel = match g.kernel {
            "gemv" => format!("lanes {}", g.lanes),
            wide => wide.to_string(),
        };
        println!(
            "{:<10} {:>7} {:>10} {:>12.1} {:>14.1} {:>10.1} {:>10.3} {:>8}",
            f.format.name(),
            g.m,
            kernel,
            t.bytes_moved as f64 / 1e6,
            t.per_dispatch_us,
            t.gb_per_s,
            f.over_copy,
            if g.passed { "ok" } else { "MISMATCH" }
        );
    }
}

fn print_formats(r: &bench::formats::FormatBench) {
    println!(
        "adapter: {} ({}, {}); {} context tokens, {} steps x {} rounds; all switches on",
        r.adapter.name,
        r.adapter.backend,
        r.adapter.driver,
        r.options.prompt_tokens,
        r.options.steps,
        r.options.rounds
    );
    println!(
        "{:<10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8} {:>10} {:>10}",
        "format",
        "B/param",
        "model MB",
        "MB/step",
        "ms/step",
        "vs f32",
        "top-1",
        "KL nats",
        "max err"
    );
    for row in &r.rows {
        let a = &row.accuracy;
        println!(
            "{:<10} {:>9.4} {:>9.2} {:>9.2} {:>9.3} {:>9.2}x {:>8.4} {:>10.2e} {:>10.2e}",
            row.format.name(),
            a.bytes_per_parameter,
            a.model_bytes as f64 / 1e6,
            row.bytes_per_step as f64 / 1e6,
            row.ms_per_step,
            row.speedup_vs_f32,
            a.top1_agreement,
            a.kl_divergence,
            a.max_logit_error
        );
    }
}

fn print_decode(r: &bench::decode::DecodeBench) {
    println!(
        "adapter: {} ({}, {}); {} context tokens, {} steps x {} rounds",
        r.adapter.name,
        r.adapter.backend,
        r.adapter.driver,
        r.options.prompt_tokens,
        r.options.steps,
        r.options.rounds
    );
    println!(
        "{:<26} {:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:>5} {:>8} {:>9}",
        "variant",
        "ms/step",
        "speedup",
        "record us",
        "submit us",
        "gpu us",
        "kernels",
        "subs",
        "MB/step",
        "max diff"
    );
    for v in &r.variants {
        println!(
            "{:<26} {:>9.3} {:>7.2}x {:>9.0} {:>9.0} {:>9} {:>8} {:>5} {:>8.2} {:>9.1e}",
            v.name,
            v.ms_per_step,
            v.speedup_vs_baseline,
            v.record_us_per_step,
            v.submit_us_per_step,
            v.gpu_us_per_step
                .map_or("-".into(), |us| format!("{us:.1}")),
            v.kernels_per_step,
            v.submissions_per_step,
            v.bytes_per_step as f64 / 1e6,
            v.max_logit_diff_vs_baseline
        );
    }
}

/// `rack eval`'s output: the evaluation and the out-of-sample error band of its regime (the
/// median and largest relative error of the validation rows like it).
#[derive(serde::Serialize)]
struct Estimate {
    #[serde(flatten)]
    evaluation: rack::Evaluation,
    error_band: f64,
    error_band_max: f64,
    error_band_regime: rack::validation::Regime,
    error_band_rows: usize,
}

fn load_scenario(path: &str) -> Result<rack::Scenario, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    rack::Scenario::from_text(path, &text).map_err(|e| invalid(path, e))
}

fn invalid(path: &str, e: rack::RackError) -> Failure {
    Failure::Invalid(format!("{path}: {e}"))
}

fn run_rack(command: RackCommand) -> Result<(), Failure> {
    let params = rack::Params::fitted();
    match command {
        RackCommand::Eval { scenario } => {
            let s = load_scenario(&scenario)?;
            let e = rack::eval(&s, &params).map_err(|e| invalid(&scenario, e))?;
            let band = rack::validation::band_of(&e)?;
            println!(
                "{}",
                to_json(&Estimate {
                    evaluation: e,
                    error_band: band.median,
                    error_band_max: band.max,
                    error_band_regime: band.regime,
                    error_band_rows: band.rows,
                })?
            );
        }
        RackCommand::Sweep { scenario, points } => {
            let s = load_scenario(&scenario)?;
            let curve = rack::sweep(&s, &params, points).map_err(|e| invalid(&scenario, e))?;
            println!("{}", to_json(&curve)?);
        }
        RackCommand::Waterfall { scenario } => {
            let s = load_scenario(&scenario)?;
            let steps = rack::waterfall(&s, &params).map_err(|e| invalid(&scenario, e))?;
            println!("{}", to_json(&steps)?);
        }
        RackCommand::Calibrate {
            json,
            write,
            check,
            markdown,
        } => {
            let fit = if check {
                calibrate::Fit::of(params)
            } else {
                calibrate::fit(&params)
            }
            .map_err(|e| e.to_string())?;
            if json {
                println!("{}", to_json(&fit)?);
            } else if markdown {
                let (parameters, calibration, validation) = calibrate::markdown(&fit);
                println!("{parameters}\n{calibration}\n{validation}");
            } else {
                print_fit(&fit);
            }
            if write {
                let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/rack/fitted.json");
                let text = serde_json::to_string_pretty(&fit.params).map_err(|e| e.to_string())?;
                std::fs::write(path, text + "\n").map_err(|e| format!("{path}: {e}"))?;
            }
            if !fit.all_within {
                return Err(Failure::Other(
                    "some calibration points are outside their bounds".into(),
                ));
            }
        }
    }
    Ok(())
}

fn print_fit(fit: &calibrate::Fit) {
    println!("fitted parameters");
    for q in &fit.parameters {
        let error = if q.fixed {
            "fixed".to_string()
        } else {
            format!("± {:.3}", q.standard_error)
        };
        println!(
            "  {:<20} {:>10.4} {:>10}   (bounds {} .. {}){}  pinned by {}",
            q.name,
            q.value,
            error,
            q.lower_bound,
            q.upper_bound,
            if q.at_bound { " AT A BOUND" } else { "" },
            q.pinned_by.len()
        );
    }
    println!();
    println!(
        "{:<30} {:>12} {:>12} {:>9} {:>6}  metric",
        "point", "measured", "predicted", "residual", "bound"
    );
    for r in &fit.residuals {
        println!(
            "{:<30} {:>12.4} {:>12.4} {:>+8.1}% {:>5.0}%{} {}",
            r.id,
            r.measured,
            r.predicted,
            100.0 * r.residual,
            100.0 * r.bound,
            if r.within { " " } else { "!" },
            r.metric
        );
    }
    println!();
    println!("validation (never fitted; see docs/RACK_MODEL.md)");
    for r in &fit.validation {
        println!(
            "{:<30} {:>12.4} {:>12.4} {:>+8.1}%{}  {:<16} {}",
            r.name,
            r.measured,
            r.predicted,
            100.0 * r.rel_error,
            if r.within_target { " " } else { "!" },
            format!("{:?}", r.regime),
            r.metric
        );
    }
    let s = &fit.summary;
    println!();
    println!(
        "validation: {} rows, median {:.1}%, max {:.1}% (targets {:.0}% / {:.0}%: {}); calibration: median {:.1}%, max {:.1}%",
        s.n_validation,
        100.0 * s.validation_median,
        100.0 * s.validation_max,
        100.0 * s.target_median,
        100.0 * s.target_max,
        if s.meets_targets { "met" } else { "not met" },
        100.0 * s.calibration_median,
        100.0 * s.calibration_max
    );
}
