//! The protobuf text format of every message of this crate — `.pbtxt` graphs,
//! the `checkpoint` state file, TensorFlow Serving's configuration files — read
//! and written by reflection over the descriptors `build.rs` compiled the
//! messages from, so there is one implementation for all of them.
//!
//! - [`from_text`] parses with [`prost_reflect`]'s text-format parser: nested
//!   messages in `{}` or `<>`, repeated fields repeated or as `[a, b]` lists,
//!   map entries (`attr { key: "k" value { … } }`), enum values by name
//!   (`DT_FLOAT`) or number, C-style string escapes (octal, hex, `\u`),
//!   adjacent string literals, `inf`/`-inf`/`nan`, `#` comments, and
//!   `google.protobuf.Any` in its expanded form. As in TensorFlow's own parsers,
//!   a field the message does not declare, or a singular field given twice, is
//!   an error. Input nested more than [`MAX_DEPTH`] messages deep is refused
//!   before parsing, so no input can exhaust the stack.
//! - [`to_text`] writes the layout TensorFlow's Python `text_format` prints (see
//!   [`write`]), which TensorFlow's parsers and [`from_text`] read back.
//!
//! A message converts between its generated type and reflection through its
//! binary encoding. Both come from the same `.proto` files, except for the few
//! fields `build.rs` declares for the text format but leaves out of the
//! generated structs (`NOT_GENERATED`: TensorFlow's debug information and full
//! types): those are read and dropped, as binary decoding drops them.
//!
//! ```
//! use actorflow_proto::tensorflow::CheckpointState;
//! use actorflow_proto::text::{from_text, to_text};
//!
//! let s: CheckpointState = from_text(
//!     "model_checkpoint_path: \"model.ckpt-2\"\n\
//!      all_model_checkpoint_paths: [\"model.ckpt-1\", 'model.ckpt-2']",
//! )
//! .unwrap();
//! assert_eq!(s.all_model_checkpoint_paths.len(), 2);
//! assert_eq!(
//!     to_text(&s),
//!     "model_checkpoint_path: \"model.ckpt-2\"\n\
//!      all_model_checkpoint_paths: \"model.ckpt-1\"\n\
//!      all_model_checkpoint_paths: \"model.ckpt-2\"\n"
//! );
//! let e = from_text::<CheckpointState>("model_checkpoint_path: 3").unwrap_err();
//! assert_eq!((e.line(), e.column()), (1, 24));
//! ```

use std::sync::OnceLock;

use prost::{Message, Name};
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};

mod write;

pub use write::escape_bytes;

/// The deepest nesting of messages [`from_text`] accepts: the recursion limit
/// prost applies to binary input too, so whatever parses also decodes.
pub const MAX_DEPTH: usize = 100;

/// The descriptors of every message and enum of this crate (and the
/// `google.protobuf` types they use), for reflection.
pub fn descriptor_pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(&include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"))[..])
            .expect("build.rs writes the descriptors protox compiled, which are valid")
    })
}

/// The descriptor of message type `M`.
fn descriptor<M: Name>() -> Option<MessageDescriptor> {
    descriptor_pool().get_message_by_name(&M::full_name())
}

/// Why text did not parse, and where: a 1-based line and column (in
/// characters) of the offending token, or of the end of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextError {
    line: usize,
    column: usize,
    message: String,
}

impl TextError {
    /// An error at byte `offset` of `text`.
    fn at(text: &str, offset: usize, message: impl Into<String>) -> TextError {
        let before = text.get(..offset).unwrap_or(text);
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        TextError {
            line: before.matches('\n').count() + 1,
            column: before.get(line_start..).unwrap_or("").chars().count() + 1,
            message: message.into(),
        }
    }

    /// The line, from 1.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The column within the line, in characters, from 1.
    pub fn column(&self) -> usize {
        self.column
    }

    /// What is wrong, without the position.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for TextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {} column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for TextError {}

/// Parses a message of type `M` from the text format; see the module docs.
pub fn from_text<M: Message + Name + Default>(text: &str) -> Result<M, TextError> {
    check_depth(text)?;
    let Some(desc) = descriptor::<M>() else {
        let name = M::full_name();
        return Err(TextError::at(text, 0, format!("{name} has no descriptor")));
    };
    let dynamic = DynamicMessage::parse_text_format(desc, text).map_err(|e| {
        use prost_reflect::text_format::ParseError;
        let offset = miette::Diagnostic::labels(&e as &ParseError)
            .and_then(|mut labels| labels.next())
            .map_or(text.len(), |l| l.offset());
        TextError::at(text, offset, e.to_string())
    })?;
    dynamic.transcode_to::<M>().map_err(|e| {
        TextError::at(
            text,
            text.len(),
            format!("the parsed message does not decode: {e}"),
        )
    })
}

/// Writes `message` in the text format TensorFlow's Python prints; see
/// [`write`].
///
/// # Panics
///
/// When `M` is not a message of this crate (every generated message is in
/// [`descriptor_pool`]).
pub fn to_text<M: Message + Name>(message: &M) -> String {
    let desc = descriptor::<M>().expect("every message of this crate has a descriptor");
    let dynamic = DynamicMessage::decode(desc, message.encode_to_vec().as_slice())
        .expect("a message's own encoding decodes with its own descriptor");
    write::message(&dynamic)
}

/// Refuses text whose messages nest more than [`MAX_DEPTH`] deep, counting the
/// brackets that open a message (`{`, `<`) outside strings and comments, so
/// that the recursive parser never meets such input.
fn check_depth(text: &str) -> Result<(), TextError> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'#' => {
                while bytes.get(i).is_some_and(|&c| c != b'\n') {
                    i += 1;
                }
            }
            b'"' | b'\'' => {
                i += 1;
                // a string ends at its quote; a newline ends a malformed one
                while let Some(&c) = bytes.get(i) {
                    match c {
                        b'\\' => i += 1,
                        b'\n' => break,
                        c if c == b => break,
                        _ => {}
                    }
                    i += 1;
                }
            }
            b'{' | b'<' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    let why = format!("messages are nested more than {MAX_DEPTH} deep");
                    return Err(TextError::at(text, i, why));
                }
            }
            b'}' | b'>' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
