//! The one error type of actorflow: a [`Status`] with TensorFlow's canonical
//! [`Code`]s, a message and, where it applies, the name of the node that failed.
//!
//! `Status` is boxed inside so that `Result<T, Status>` stays one word wider than
//! `T` on the executor's hot path.

use std::fmt;

/// TensorFlow's canonical error codes (`tensorflow/core/protobuf/error_codes.proto`),
/// with the same numbers.
///
/// Non-exhaustive: TensorFlow may add codes, so a `match` needs a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Code {
    /// Not an error.
    Ok = 0,
    /// The operation was cancelled.
    Cancelled = 1,
    /// Unknown error.
    Unknown = 2,
    /// The client specified an invalid argument.
    InvalidArgument = 3,
    /// The deadline expired before the operation could complete.
    DeadlineExceeded = 4,
    /// Some requested entity was not found.
    NotFound = 5,
    /// The entity that a client attempted to create already exists.
    AlreadyExists = 6,
    /// The caller does not have permission.
    PermissionDenied = 7,
    /// Some resource has been exhausted.
    ResourceExhausted = 8,
    /// The system is not in a state required for the operation's execution.
    FailedPrecondition = 9,
    /// The operation was aborted.
    Aborted = 10,
    /// The operation was attempted past the valid range (e.g. a drained queue).
    OutOfRange = 11,
    /// The operation is not implemented or supported.
    Unimplemented = 12,
    /// An invariant of the runtime is broken.
    Internal = 13,
    /// The service is currently unavailable.
    Unavailable = 14,
    /// Unrecoverable data loss or corruption.
    DataLoss = 15,
    /// The request does not have valid authentication credentials.
    Unauthenticated = 16,
}

impl Code {
    /// TensorFlow's name for the code (`INVALID_ARGUMENT`, …).
    pub fn name(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The code for TensorFlow's number, `Unknown` for numbers it does not define.
    pub fn from_i32(v: i32) -> Code {
        match v {
            0 => Code::Ok,
            1 => Code::Cancelled,
            3 => Code::InvalidArgument,
            4 => Code::DeadlineExceeded,
            5 => Code::NotFound,
            6 => Code::AlreadyExists,
            7 => Code::PermissionDenied,
            8 => Code::ResourceExhausted,
            9 => Code::FailedPrecondition,
            10 => Code::Aborted,
            11 => Code::OutOfRange,
            12 => Code::Unimplemented,
            13 => Code::Internal,
            14 => Code::Unavailable,
            15 => Code::DataLoss,
            16 => Code::Unauthenticated,
            _ => Code::Unknown,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The underlying error of an I/O or decode failure, shared so that `Status`
/// stays `Clone`.
type Source = std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Clone)]
struct Inner {
    code: Code,
    message: String,
    node: Option<String>,
    source: Option<Source>,
}

/// Two statuses are equal when their code, message and node are: the source is
/// the cause's detail, not part of the status's identity.
impl PartialEq for Inner {
    fn eq(&self, other: &Inner) -> bool {
        self.code == other.code && self.message == other.message && self.node == other.node
    }
}

impl Eq for Inner {}

/// An error: a canonical [`Code`], a message, optionally the failing node's name
/// and, for I/O and decode failures, the underlying error as its
/// [`source`](std::error::Error::source).
///
/// # Examples
/// ```
/// use actorflow_graph::{Code, Status};
/// let s = Status::invalid_argument("shapes [2] and [3] are incompatible").with_node("add");
/// assert_eq!(s.code(), Code::InvalidArgument);
/// assert_eq!(s.node(), Some("add"));
/// assert!(s.to_string().contains("node 'add'"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Status(Box<Inner>);

/// `Result` with [`Status`] as its error.
pub type Result<T, E = Status> = std::result::Result<T, E>;

macro_rules! ctor {
    ($($fn_name:ident => $code:ident),* $(,)?) => {
        $(
            #[doc = concat!("A `", stringify!($code), "` status with this message.")]
            pub fn $fn_name(message: impl Into<String>) -> Status {
                Status::new(Code::$code, message)
            }
        )*
    };
}

impl Status {
    /// A status with this code and message, naming no node.
    pub fn new(code: Code, message: impl Into<String>) -> Status {
        Status(Box::new(Inner {
            code,
            message: message.into(),
            node: None,
            source: None,
        }))
    }

    ctor! {
        cancelled => Cancelled,
        unknown => Unknown,
        invalid_argument => InvalidArgument,
        deadline_exceeded => DeadlineExceeded,
        not_found => NotFound,
        already_exists => AlreadyExists,
        resource_exhausted => ResourceExhausted,
        failed_precondition => FailedPrecondition,
        aborted => Aborted,
        out_of_range => OutOfRange,
        unimplemented => Unimplemented,
        internal => Internal,
        unavailable => Unavailable,
        data_loss => DataLoss,
    }

    /// The canonical code.
    pub fn code(&self) -> Code {
        self.0.code
    }

    /// The message, without the node name.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The node the error is attributed to, if any.
    pub fn node(&self) -> Option<&str> {
        self.0.node.as_deref()
    }

    /// Attributes the error to `node` unless it already names one (the innermost
    /// attribution wins, as in TensorFlow's `AttachDefToStatus`).
    pub fn with_node(mut self, node: impl Into<String>) -> Status {
        if self.0.node.is_none() {
            self.0.node = Some(node.into());
        }
        self
    }

    /// Keeps `cause` as the status's [`source`](std::error::Error::source) (the
    /// message should already say what failed; the source keeps the detail for
    /// callers that walk the chain, e.g. `anyhow`'s `{:#}`).
    pub fn with_source(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Status {
        self.0.source = Some(std::sync::Arc::new(cause));
        self
    }

    /// Prefixes the message with `context: `.
    pub fn context(mut self, context: impl fmt::Display) -> Status {
        self.0.message = format!("{context}: {}", self.0.message);
        self
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.0.code, self.0.message)?;
        if let Some(node) = &self.0.node {
            write!(f, " (node '{node}')")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Status {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<std::io::Error> for Status {
    fn from(e: std::io::Error) -> Status {
        let code = match e.kind() {
            // A path through a file ("a.npy/b") names nothing.
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => Code::NotFound,
            // A directory where a file was wanted is a bad argument, not UNKNOWN.
            std::io::ErrorKind::IsADirectory => Code::InvalidArgument,
            std::io::ErrorKind::PermissionDenied => Code::PermissionDenied,
            std::io::ErrorKind::AlreadyExists => Code::AlreadyExists,
            std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => {
                Code::InvalidArgument
            }
            std::io::ErrorKind::UnexpectedEof => Code::OutOfRange,
            std::io::ErrorKind::TimedOut => Code::DeadlineExceeded,
            _ => Code::Unknown,
        };
        Status::new(code, e.to_string()).with_source(e)
    }
}

/// Returns early with an `InvalidArgument` status unless `cond` holds.
///
/// `ensure!(cond, Code, "fmt", args…)` picks another code.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $code:ident, $($fmt:tt)+) => {
        if !($cond) {
            return Err($crate::Status::new($crate::Code::$code, format!($($fmt)+)));
        }
    };
    ($cond:expr, $($fmt:tt)+) => {
        if !($cond) {
            return Err($crate::Status::invalid_argument(format!($($fmt)+)));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_small_and_displays_node() {
        assert_eq!(std::mem::size_of::<Status>(), std::mem::size_of::<usize>());
        let s = Status::not_found("no such tensor")
            .with_node("a")
            .with_node("b");
        assert_eq!(s.node(), Some("a"));
        assert_eq!(s.to_string(), "NOT_FOUND: no such tensor (node 'a')");
        assert_eq!(Code::from_i32(11), Code::OutOfRange);
        assert_eq!(Code::from_i32(99), Code::Unknown);
    }

    #[test]
    fn ensure_macro_returns_the_code() {
        fn f(x: i32) -> Result<()> {
            ensure!(x > 0, OutOfRange, "x={x}");
            ensure!(x < 10, "too big: {x}");
            Ok(())
        }
        assert!(f(1).is_ok());
        assert_eq!(f(0).unwrap_err().code(), Code::OutOfRange);
        assert_eq!(f(11).unwrap_err().code(), Code::InvalidArgument);
    }

    #[test]
    fn reading_a_directory_or_through_a_file_is_not_unknown() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let file = dir.join("f");
        std::fs::write(&file, b"x").unwrap();
        let code = |p: &std::path::Path| Status::from(std::fs::read(p).unwrap_err()).code();
        assert_eq!(code(&dir), Code::InvalidArgument);
        assert_eq!(code(&file.join("g")), Code::NotFound);
        assert_eq!(code(&dir.join("missing")), Code::NotFound);
    }

    #[test]
    fn io_errors_keep_their_source() {
        use std::error::Error as _;
        let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "slow disk");
        let s = Status::from(io).context("reading 'x'");
        assert_eq!(s.code(), Code::DeadlineExceeded);
        assert_eq!(s.message(), "reading 'x': slow disk");
        let source = s.source().expect("the io::Error is kept");
        let io = source.downcast_ref::<std::io::Error>().unwrap();
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
        // The source survives clones and does not take part in equality.
        assert!(s.clone().source().is_some());
        assert_eq!(s, Status::deadline_exceeded("reading 'x': slow disk"));
        assert!(Status::internal("no cause").source().is_none());
    }
}
