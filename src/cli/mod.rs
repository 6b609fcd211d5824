//! The `actorflow` command line (clap derive), one module per subcommand:
//!
//! - [`run`] — `actorflow run`: load a graph, run init targets, then steps with
//!   feeds (`.npy`), fetches and targets; print or save (`.npy`) the fetches.
//! - [`trace`] — `actorflow trace`: `run`, traced, writing a Chrome trace.
//! - [`inspect`] — `actorflow inspect`: op histogram, placement, partitions, DOT/SVG.
//! - [`bench`] — `actorflow bench`: the benchmark suite as a table or JSON.
//! - [`server`] — `actorflow server`: one task of a cluster (master and worker).
//! - [`serve`] — `actorflow serve`: a model server (TensorFlow Serving's flags and APIs).
//!
//! Failures print `error: CODE: message` to standard error and exit with the
//! error's canonical code number (`INVALID_ARGUMENT` → 3, `NOT_FOUND` → 5, …);
//! command-line mistakes exit with [`USAGE_EXIT`] (64, BSD's `EX_USAGE`) after the usage message.

pub mod bench;
pub mod inspect;
pub mod run;
pub mod serve;
pub mod server;
pub mod trace;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use actorflow::graph::import::{load_graph_def, ImportOptions};
use actorflow::{Connect, GraphDef, Result, Session, SessionOptions, Status};
use clap::{Args, Parser, Subcommand};

/// actorflow: a TensorFlow-1.x-style dataflow runtime in which every moving part
/// is an actor.
#[derive(Parser, Debug)]
#[command(name = "actorflow", version, about, long_about = None)]
pub struct Cli {
    /// Log as JSON lines instead of text (logs go to stderr; filter with RUST_LOG,
    /// e.g. RUST_LOG=debug).
    #[arg(long, global = true)]
    pub log_json: bool,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a graph: init targets first, then steps with feeds, fetches and
    /// targets; or run a SavedModel's signature on inputs.
    Run(run::RunArgs),
    /// Run a graph as `run` does, traced, and write a Chrome trace (Perfetto).
    Trace(trace::TraceArgs),
    /// Show a graph's ops, placement and partitions (or write it as DOT or SVG),
    /// a checkpoint's tensors, or a SavedModel's tag sets and signatures.
    Inspect(inspect::InspectArgs),
    /// Run the benchmark suite and print a table or one JSON object.
    Bench(bench::BenchArgs),
    /// Serve one task of a cluster (TensorFlow's MasterService and WorkerService
    /// over gRPC) until SIGINT or SIGTERM.
    Server(server::ServerArgs),
    /// Serve SavedModels with TensorFlow Serving's REST and gRPC APIs: model
    /// versions, labels, warmup and batching, until SIGINT or SIGTERM.
    Serve(serve::ServeArgs),
}

/// How to load a graph and open a session on it (shared by the subcommands).
#[derive(Args, Debug, Clone)]
pub struct GraphArgs {
    /// The graph: actorflow JSON (.json), TensorFlow binary GraphDef (.pb) or text
    /// GraphDef (.pbtxt, .txt); for `run` and `inspect` also a SavedModel
    /// directory, and for `inspect` a checkpoint prefix.
    pub graph: PathBuf,
    /// CPU devices of the session.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub devices: u16,
    /// Ignore the devices the graph's nodes ask for (TensorFlow's clear_devices).
    #[arg(long)]
    pub clear_devices: bool,
    /// Place a node elsewhere when the device it asks for does not exist.
    #[arg(long)]
    pub soft_placement: bool,
    /// The most bytes one tensor may take; a larger one fails its step with
    /// RESOURCE_EXHAUSTED naming the node (default: the machine's memory).
    #[arg(long, value_name = "BYTES")]
    pub max_allocation_bytes: Option<usize>,
    /// Start each cross-device receive as late as the step's estimated critical
    /// path allows (TensorFlow's `GraphOptions.enable_recv_scheduling`).
    #[arg(long)]
    pub enable_recv_scheduling: bool,
    /// Run on a cluster: open the session on the master at this target
    /// (`grpc://host:port`, an `actorflow server` or a TensorFlow server) instead
    /// of in this process.
    #[arg(long, value_name = "grpc://HOST:PORT")]
    pub master: Option<String>,
    /// Mutual TLS to the master.
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// Mutual TLS between a cluster's processes and their clients: all three files
/// or none.
#[derive(Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// This process's certificate chain (PEM), signed by `--tls-ca`.
    #[arg(long, value_name = "PEM", requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(long, value_name = "PEM", requires_all = ["tls_cert", "tls_ca"])]
    pub tls_key: Option<PathBuf>,
    /// The CA that signed every task's and client's certificate (PEM): peers
    /// are trusted only with a certificate it signed.
    #[arg(long, value_name = "PEM", requires_all = ["tls_cert", "tls_key"])]
    pub tls_ca: Option<PathBuf>,
}

impl TlsArgs {
    /// The TLS configuration, when the flags ask for one.
    pub fn load(&self) -> Result<Option<actorflow::distributed::Tls>> {
        match (&self.tls_cert, &self.tls_key, &self.tls_ca) {
            (Some(c), Some(k), Some(a)) => {
                actorflow::distributed::Tls::from_files(c, k, a).map(Some)
            }
            _ => Ok(None),
        }
    }
}

impl GraphArgs {
    /// Loads the graph.
    pub fn load(&self) -> Result<GraphDef> {
        load_graph_def(
            &self.graph,
            &ImportOptions::default().with_clear_devices(self.clear_devices),
        )
    }

    /// The session options the flags ask for.
    pub fn options(&self) -> SessionOptions {
        SessionOptions::default()
            .with_cpu_devices(usize::from(self.devices))
            .with_allow_soft_placement(self.soft_placement)
            .with_max_allocation_bytes(self.max_allocation_bytes)
            .with_enable_recv_scheduling(self.enable_recv_scheduling)
    }

    /// Opens a session on `graph`.
    pub fn session(&self, graph: &GraphDef) -> Result<Session> {
        let options = self.options();
        match &self.master {
            Some(target) => {
                let mut client = actorflow::distributed::ClientOptions::default();
                client.peer.tls = self.tls.load()?;
                Session::connect_with(target, graph, options, client)
            }
            None if self.tls.tls_cert.is_some() => Err(Status::invalid_argument(
                "--tls-cert, --tls-key and --tls-ca secure the connection to --master; \
                 there is none",
            )),
            None => Session::new(graph, options),
        }
    }
}

/// A file error naming the file.
pub fn io_error(e: std::io::Error, what: &str, path: &Path) -> Status {
    Status::from(e).context(format_args!("{what} '{}'", path.display()))
}

/// The exit status of a command-line mistake (BSD's `EX_USAGE`): clap's own 2
/// would read as TensorFlow's `UNKNOWN`, which a failed run exits with.
pub const USAGE_EXIT: u8 = 64;

/// Parses the command line, runs the subcommand, and turns its result into the
/// exit status: 0, the canonical code of the error, or [`USAGE_EXIT`].
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            // Help and version go to stdout with status 0; mistakes to stderr.
            let _ = e.print();
            return if usage {
                ExitCode::from(USAGE_EXIT)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if let Err(e) = actorflow::logging::init(cli.log_json) {
        eprintln!("warning: logging disabled: {e}");
    }
    let result = match cli.command {
        Command::Run(a) => run::main(&a),
        Command::Trace(a) => trace::main(&a),
        Command::Inspect(a) => inspect::main(&a),
        Command::Bench(a) => bench::main(&a),
        Command::Server(a) => server::main(&a),
        Command::Serve(a) => serve::main(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from((e.code() as u8).max(1))
        }
    }
}
