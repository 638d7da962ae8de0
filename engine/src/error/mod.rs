//! Errors of the engine API, one type per operation (as redb does):
//! [`OpenError`] is what [`Engine::open`](crate::Engine::open) can return,
//! [`RequestError`] what a [`Reply`](crate::Reply) resolves to. [`Error`]
//! is the umbrella for callers that handle both the same way (`?` converts
//! either into it).

mod kind;
mod open;
mod request;
mod shutdown;

pub use kind::ErrorKind;
pub use open::OpenError;
pub use request::RequestError;
pub use shutdown::ShutdownError;

use corelog_segment::log::LogError;

/// Any corelog error: opening the engine or a request to it.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A request to a running engine failed.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The engine did not shut down cleanly.
    #[error(transparent)]
    Shutdown(#[from] ShutdownError),
    /// A batch could not be built ([`BatchBuilder::build`](crate::BatchBuilder::build)).
    #[error(transparent)]
    Build(#[from] corelog_segment::BuildError),
    /// Bytes are not a valid batch ([`Batch::admit`](crate::Batch::admit)).
    #[error(transparent)]
    Batch(#[from] corelog_segment::BatchError),
}

/// A partition log's error (for instance from [`PollReply::verify`](crate::PollReply::verify))
/// is a failed request.
impl From<LogError> for Error {
    fn from(e: LogError) -> Error {
        Error::Request(RequestError::Storage(e))
    }
}
