//! Why a catalog change failed: a refusal (of the permission check, of the
//! catalog, of the accounts) or a failed write. `wire/status.rs` gives each
//! its Iggy status.

use crate::catalog::accounts::AccountError;
use crate::catalog::model::CatalogError;
use crate::catalog::store::MetadataError;
use crate::commands::authz::Denied;

/// A catalog change's failure: a refusal or a failed write.
#[derive(Debug)]
pub(crate) enum UpdateError {
    /// The permission check refused it.
    Denied(Denied),
    /// The catalog refused it.
    Catalog(CatalogError),
    /// The catalog could not be written.
    Metadata(MetadataError),
}

impl From<Denied> for UpdateError {
    fn from(e: Denied) -> UpdateError {
        UpdateError::Denied(e)
    }
}

impl From<MetadataError> for UpdateError {
    fn from(e: MetadataError) -> UpdateError {
        UpdateError::Metadata(e)
    }
}

impl From<CatalogError> for UpdateError {
    fn from(e: CatalogError) -> UpdateError {
        UpdateError::Catalog(e)
    }
}

/// A user or token change's failure: a refusal or a failed write.
#[derive(Debug)]
pub(crate) enum AccountUpdate {
    /// The permission check refused it.
    Denied(Denied),
    /// The accounts refused it.
    Refused(AccountError),
    /// The catalog could not be written.
    Write(MetadataError),
}

impl From<Denied> for AccountUpdate {
    fn from(e: Denied) -> AccountUpdate {
        AccountUpdate::Denied(e)
    }
}

impl From<MetadataError> for AccountUpdate {
    fn from(e: MetadataError) -> AccountUpdate {
        AccountUpdate::Write(e)
    }
}

impl From<AccountError> for AccountUpdate {
    fn from(e: AccountError) -> AccountUpdate {
        AccountUpdate::Refused(e)
    }
}
