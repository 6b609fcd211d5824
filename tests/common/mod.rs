//! Helpers shared by integration tests (`mod common;`).

use std::path::PathBuf;

/// A temporary directory, unique per test binary, call and `tag` (a name
/// `tempfile` picks, so concurrent runs never share one), removed on drop, a
/// panicking test's too. A `TempDir(path)` built by hand is removed as well.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh, empty directory.
    pub fn new(tag: &str) -> TempDir {
        let binary = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let dir = tempfile::Builder::new()
            .prefix(&format!("af_{binary}_{tag}_"))
            .tempdir()
            .unwrap();
        // Drop below removes it; `.0` stays a plain path for the tests.
        TempDir(dir.keep())
    }

    /// Writes `contents` to `name` in the directory; returns its path.
    pub fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, contents).unwrap();
        p.to_str().unwrap().to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
