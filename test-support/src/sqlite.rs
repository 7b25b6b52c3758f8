//! SQLite fixtures: a fresh database file in a temporary directory of its own,
//! removed (with the directory) on drop.

use std::path::{Path, PathBuf};

/// A path for a fresh database file; nothing is created but the directory.
#[derive(Debug)]
pub struct SqliteFile {
    dir: tempfile::TempDir,
    path: PathBuf,
}

impl SqliteFile {
    /// A file named `name` in a fresh temporary directory.
    pub fn new(name: &str) -> SqliteFile {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join(name);
        SqliteFile { dir, path }
    }

    /// The database file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory holding it (and the store's side files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `sqlite://<path>`, as `tenure::open` reads it.
    pub fn url(&self) -> String {
        format!("sqlite://{}", self.path.display())
    }
}
