//! Being written.
use std::future::Future;
use std::sync::Arc;

use graph::Result;

use crate::server::ApiState;

/// Serves the REST API on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ApiState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let _ = (listener, state);
    shutdown.await;
    Ok(())
}
