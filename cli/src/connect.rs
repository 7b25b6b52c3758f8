//! Opening the store a URL names, for the operator commands.

use tenure::DynStore;

use crate::error::CliError;

/// Opens `url` with [`tenure::open`]. Except for `migrate`, a SQLite file must exist
/// already: an inspection of a mistyped path would otherwise make a new, empty file
/// and report nothing wrong.
pub(crate) async fn open(url: &str, create: bool) -> Result<DynStore, CliError> {
    if !create && tenure::backend(url)?.name == "sqlite" {
        let config = tenure::SqliteConfig::from_url(url)?;
        let path = config.path();
        if !path.exists() {
            return Err(CliError::NotFound {
                what: "database",
                detail: format!("no SQLite file at {}", path.display()),
            });
        }
    }
    Ok(tenure::open(url).await?)
}
