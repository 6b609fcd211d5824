//! Being written.
use std::path::Path;

use graph::Result;

use crate::servable::Servable;

/// Warms `servable` up before it takes traffic.
pub fn warm_up(servable: &Servable, dir: &Path) -> Result<()> {
    let _ = (servable, dir);
    Ok(())
}
