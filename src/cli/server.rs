//! `actorflow server`: one task of a cluster. `--cluster job=host:port,…`
//! (repeatable, one per job) describes every task; `--job` and `--task` say which
//! one this process is. It binds the address the cluster gives its task, serves
//! TensorFlow's `MasterService` and `WorkerService` there, prints one line
//! `listening on HOST:PORT` to stdout when ready, and stops cleanly on SIGINT or
//! SIGTERM.

use std::io::Write;

use actorflow::{ClusterSpec, Result, Server, ServerOptions};
use clap::Args;

/// Arguments of `actorflow server`.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// A job of the cluster and its tasks' addresses, in task order
    /// (`worker=127.0.0.1:2222,127.0.0.1:2223`); repeatable, one per job.
    #[arg(
        long = "cluster",
        value_name = "JOB=HOST:PORT[,HOST:PORT…]",
        required = true
    )]
    pub cluster: Vec<String>,
    /// This server's job.
    #[arg(long)]
    pub job: String,
    /// This server's task index in its job.
    #[arg(long, default_value_t = 0)]
    pub task: u32,
    /// CPU devices of this task.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub devices: u16,
    /// The most bytes one tensor may take on this task (default: the machine's
    /// memory).
    #[arg(long, value_name = "BYTES")]
    pub max_allocation_bytes: Option<usize>,
    /// Accept `CreateWorkerSession`, `RegisterGraph` and `RunGraph` from any host
    /// (by default only from the hosts of the cluster spec).
    #[arg(long)]
    pub accept_any_master: bool,
    /// Mutual TLS: this task serves only TLS clients holding a certificate the
    /// CA signed, and calls its peers over TLS.
    #[command(flatten)]
    pub tls: super::TlsArgs,
}

/// Runs `actorflow server`.
pub fn main(a: &ServerArgs) -> Result<()> {
    let cluster = ClusterSpec::parse(&a.cluster)?;
    let mut options = ServerOptions::new(cluster, &a.job, a.task);
    options.cpu_devices = usize::from(a.devices);
    options.max_allocation_bytes = a.max_allocation_bytes;
    options.accept_any_master = a.accept_any_master;
    options.peer_options.tls = a.tls.load()?;
    let mut server = Server::start(options)?;
    let addr = server.local_addr();
    server.wait_for_signal(|| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on {addr}");
        let _ = out.flush();
    })?;
    tracing::info!(task = %server.task(), "stopping");
    server.stop();
    Ok(())
}
