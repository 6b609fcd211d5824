//! `RecvTensor` without copies of the tensor (TensorFlow's `grpc_tensor_coding`):
//! the tensor's bytes are the one big part of a `RecvTensorResponse`, so both ends
//! handle that message themselves instead of through prost and tonic's codec
//! (which would copy the bytes into an encode buffer on the sender, and into a
//! decode buffer and then into the tensor on the receiver).
//!
//! - Sender ([`encode_response`]): the response is framed as three pieces — the
//!   gRPC header and every field before the tensor's `tensor_content`, the content
//!   itself (a `Bytes` sharing the tensor's buffer), and the fields after it — and
//!   HTTP/2 writes the middle piece from the tensor's own memory.
//! - Receiver ([`ResponseDecoder`]): a streaming protobuf reader fed the HTTP/2
//!   body's chunks as they arrive; it copies `tensor_content` once, straight into
//!   the receiving tensor's aligned buffer, and decodes every other field (small)
//!   with prost. Any valid encoding is accepted (fields in any order, content split
//!   over any chunks), so TensorFlow's own workers are served and read alike.
//!
//! The same wire format as any other gRPC peer: these are only faster encoders and
//! decoders of `tensorflow.RecvTensorResponse`. One extension, for tensors past
//! the 2 GiB a protobuf message may take (where TensorFlow fails): a caller that
//! says so in its request's `transport_options` ([`accept_chunks`]; TensorFlow
//! ignores it) gets a content over [`CHUNK_BYTES`] as several gRPC messages
//! (`actorflow.TensorChunks`), each a slice of the same shared buffer, decoded
//! into one tensor.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use graph::tensor::buffer::{AlignedBufferBuilder, AllocError};
use graph::tensor::memory::{Charge, ChargeScope};
use graph::{Result, Status, Tensor};
use http_body::Frame;
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, WireType};
use prost::Message;
use proto::actorflow::{TensorChunks, TENSOR_CHUNKS_URL};
use proto::tensorflow::{RecvTensorRequest, RecvTensorResponse, TensorProto};
use tonic::body::Body;
use tonic::codegen::{http, BoxFuture, Service};
use tonic::server::NamedService;
use tonic::transport::Channel;

use crate::wire;
use crate::worker_service::WorkerState;

/// The gRPC path of `RecvTensor` (TensorFlow serves and calls the
/// `tensorflow.WorkerService` path).
pub const RECV_TENSOR_PATH: &str = "/tensorflow.WorkerService/RecvTensor";

/// Content shorter than this is encoded and decoded with the rest of the message
/// (one small copy costs less than a piece of its own).
const INLINE: usize = 16 << 10;

/// The most a `RecvTensorRequest` may take (a key and a few numbers).
const MAX_REQUEST: usize = 1 << 20;

/// `RecvTensorResponse.tensor` and `TensorProto.tensor_content`.
const RESPONSE_TENSOR: u32 = 1;
const TENSOR_CONTENT: u32 = 4;
/// `RecvTensorResponse.transport_options`.
const RESPONSE_OPTIONS: u32 = 4;

/// The content of one message of a chunked response (see
/// `actorflow.TensorChunks`): a gigabyte, far from protobuf's 2 GiB limit.
pub const CHUNK_BYTES: usize = 1 << 30;

/// The largest message a peer's protobuf library parses (`INT32_MAX`): an
/// unchunked response must fit.
const MAX_MESSAGE: usize = i32::MAX as usize;

/// The gRPC message header: uncompressed, `len` bytes.
fn grpc_header(len: usize, out: &mut BytesMut) -> Result<()> {
    if len > MAX_MESSAGE {
        return Err(too_big(len));
    }
    out.extend_from_slice(&[0]);
    out.extend_from_slice(&(len as u32).to_be_bytes());
    Ok(())
}

/// `message` as one gRPC length-prefixed message (uncompressed).
fn grpc_frame(message: &[u8]) -> Result<Bytes> {
    let mut b = BytesMut::with_capacity(5 + message.len());
    grpc_header(message.len(), &mut b)?;
    b.extend_from_slice(message);
    Ok(b.freeze())
}

fn too_big(bytes: usize) -> Status {
    Status::resource_exhausted(format!(
        "a {bytes}-byte RecvTensor response exceeds the 2 GiB a protobuf message may \
         take; only a caller that reads chunked responses (an actorflow worker) can \
         receive this tensor"
    ))
}

/// Whether the caller of `request` reads chunked responses.
pub fn accepts_chunks(request: &RecvTensorRequest) -> bool {
    request
        .transport_options
        .as_ref()
        .is_some_and(|a| a.type_url == TENSOR_CHUNKS_URL)
}

/// `request` saying that its caller reads chunked responses.
pub fn accept_chunks(request: &mut RecvTensorRequest) {
    request.transport_options = Some(prost_types::Any {
        type_url: TENSOR_CHUNKS_URL.to_owned(),
        value: Vec::new(),
    });
}

/// The key and length prefix of the tensor field holding a `tensor_content` of
/// `content` bytes after `head` (the tensor's other fields), appended to `out`.
fn content_prefix(head: &[u8], content: usize, out: &mut BytesMut) {
    let content_field = key_len(TENSOR_CONTENT) + encoded_len_varint(content as u64);
    let tensor_len = head.len() + content_field + content;
    encode_key(RESPONSE_TENSOR, WireType::LengthDelimited, out);
    encode_varint(tensor_len as u64, out);
    out.extend_from_slice(head);
    encode_key(TENSOR_CONTENT, WireType::LengthDelimited, out);
    encode_varint(content as u64, out);
}

/// The encoded length of a tensor field holding `head` and `content` bytes.
fn tensor_field_len(head: usize, content: usize) -> usize {
    let tensor_len = head + key_len(TENSOR_CONTENT) + encoded_len_varint(content as u64) + content;
    key_len(RESPONSE_TENSOR) + encoded_len_varint(tensor_len as u64) + tensor_len
}

/// `resp` as the pieces of its gRPC messages (see the module docs): the tensor's
/// content, when large, is its own piece, shared with the tensor. A content
/// over `chunk` bytes, when `chunk` is given (the caller reads chunked
/// responses), goes as an `actorflow.TensorChunks` response of that many bytes
/// per message; otherwise the response must fit one message (2 GiB).
pub fn encode_response(mut resp: RecvTensorResponse, chunk: Option<usize>) -> Result<Vec<Bytes>> {
    let content = match resp.tensor.as_mut() {
        Some(t) if t.tensor_content.len() >= INLINE => std::mem::take(&mut t.tensor_content),
        _ => return Ok(vec![grpc_frame(&resp.encode_to_vec())?]),
    };
    if let Some(chunk) = chunk.filter(|&c| c > 0 && content.len() > c) {
        return encode_chunked(resp, content, chunk);
    }
    let head = resp.tensor.take().unwrap_or_default().encode_to_vec();
    let rest = resp.encode_to_vec();
    let mut prefix = BytesMut::with_capacity(5 + 20 + head.len());
    grpc_header(
        tensor_field_len(head.len(), content.len()) + rest.len(),
        &mut prefix,
    )?;
    content_prefix(&head, content.len(), &mut prefix);
    Ok(vec![prefix.freeze(), content, Bytes::from(rest)])
}

/// A chunked response: a first message without the content, then one message
/// per `chunk` bytes of it, each a header and a slice of the tensor's buffer.
fn encode_chunked(
    mut resp: RecvTensorResponse,
    content: Bytes,
    chunk: usize,
) -> Result<Vec<Bytes>> {
    resp.transport_options = Some(prost_types::Any {
        type_url: TENSOR_CHUNKS_URL.to_owned(),
        value: TensorChunks {
            content_bytes: content.len() as u64,
        }
        .encode_to_vec(),
    });
    let mut pieces = vec![grpc_frame(&resp.encode_to_vec())?];
    let mut at = 0;
    while at < content.len() {
        let n = chunk.min(content.len() - at);
        let mut prefix = BytesMut::with_capacity(5 + 24);
        grpc_header(tensor_field_len(0, n), &mut prefix)?;
        content_prefix(&[], n, &mut prefix);
        pieces.push(prefix.freeze());
        pieces.push(content.slice(at..at + n));
        at += n;
    }
    Ok(pieces)
}

/// Received bytes not yet parsed: the network's chunks, uncopied.
#[derive(Default)]
struct Chunks {
    parts: VecDeque<Bytes>,
    len: usize,
}

impl Chunks {
    fn push(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.len += b.len();
            self.parts.push_back(b);
        }
    }

    /// The byte at `at`, if it has arrived.
    fn byte(&self, mut at: usize) -> Option<u8> {
        for p in &self.parts {
            if at < p.len() {
                return Some(p[at]);
            }
            at -= p.len();
        }
        None
    }

    /// The varint starting at `at` and its length, if all of it has arrived;
    /// `DataLoss` when it is longer than a varint can be.
    fn varint(&self, at: usize) -> Result<Option<(u64, usize)>> {
        let mut v = 0u64;
        for i in 0..10 {
            let Some(b) = self.byte(at + i) else {
                return Ok(None);
            };
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(Some((v, i + 1)));
            }
        }
        Err(Status::data_loss(
            "RecvTensor response: a varint runs over 10 bytes",
        ))
    }

    /// Hands up to `n` bytes, front first, to `take` (which returns how many of
    /// the bytes it was shown it took; 0 stops) and drops what it took; how many.
    fn consume(&mut self, n: usize, mut take: impl FnMut(&[u8]) -> usize) -> usize {
        let mut left = n;
        while left > 0 {
            let Some(p) = self.parts.front_mut() else {
                break;
            };
            let k = take(&p[..left.min(p.len())]);
            if k == 0 {
                break;
            }
            p.advance(k);
            if p.is_empty() {
                self.parts.pop_front();
            }
            left -= k;
        }
        self.len -= n - left;
        n - left
    }

    /// Moves the first `n` bytes (all arrived) to the end of `out`.
    fn take_into(&mut self, n: usize, out: &mut Vec<u8>) {
        out.reserve(n);
        self.consume(n, |b| {
            out.extend_from_slice(b);
            b.len()
        });
    }

    /// Drops the first `n` bytes (all arrived).
    fn skip(&mut self, n: usize) {
        self.consume(n, <[u8]>::len);
    }
}

/// Where the decoder is in the body.
enum At {
    /// Before a message's 5-byte gRPC header.
    Header,
    /// At a field's key (of the response, or of its tensor inside `tensor_end`).
    Field,
    /// Inside a large `tensor_content`, `sink` taking its next `content_left`
    /// bytes.
    Content,
    /// After the whole response.
    Done,
}

/// A streaming decoder of one framed `RecvTensorResponse`, or of a chunked one
/// (`actorflow.TensorChunks`: its messages' contents go into one buffer); see
/// the module docs.
pub struct ResponseDecoder {
    at: At,
    queue: Chunks,
    /// Which message of the body, and how many of its bytes were consumed;
    /// where it and its tensor end.
    message: usize,
    pos: usize,
    message_end: usize,
    tensor_end: Option<usize>,
    saw_tensor: bool,
    /// The first message carried `transport_options`.
    saw_options: bool,
    /// The first message's fields other than a large content, re-encoded as
    /// they came (the chunk messages' other fields are dropped).
    response_fields: Vec<u8>,
    tensor_fields: Vec<u8>,
    /// Where content bytes go; how many the current field still has.
    sink: Option<AlignedBufferBuilder>,
    content_left: usize,
    /// The buffer of a whole unchunked content.
    content: Option<AlignedBufferBuilder>,
    /// The response is chunked: `sink` is the whole content's buffer.
    chunked: bool,
}

impl Default for ResponseDecoder {
    fn default() -> Self {
        ResponseDecoder::new()
    }
}

fn malformed(what: &str) -> Status {
    Status::data_loss(format!("malformed RecvTensor response: {what}"))
}

/// A buffer for `len` received bytes; `ResourceExhausted` when there is no room.
fn content_buffer(len: usize) -> Result<AlignedBufferBuilder> {
    AlignedBufferBuilder::try_with_len(len).map_err(|e| match e {
        AllocError::CapacityOverflow | AllocError::OutOfMemory { .. } => {
            Status::resource_exhausted(format!(
                "no memory for a received tensor of {len} bytes: {e}"
            ))
        }
    })
}

impl ResponseDecoder {
    /// A decoder at the start of a response body.
    pub fn new() -> ResponseDecoder {
        ResponseDecoder {
            at: At::Header,
            queue: Chunks::default(),
            message: 0,
            pos: 0,
            message_end: 0,
            tensor_end: None,
            saw_tensor: false,
            saw_options: false,
            response_fields: Vec::new(),
            tensor_fields: Vec::new(),
            sink: None,
            content_left: 0,
            content: None,
            chunked: false,
        }
    }

    /// Takes the next chunk of the body.
    pub fn push(&mut self, chunk: Bytes) -> Result<()> {
        self.queue.push(chunk);
        self.parse()
    }

    fn parse(&mut self) -> Result<()> {
        loop {
            match self.at {
                At::Header => {
                    if self.queue.len < 5 {
                        return Ok(());
                    }
                    let mut h = Vec::with_capacity(5);
                    self.queue.take_into(5, &mut h);
                    if h[0] != 0 {
                        return Err(Status::unimplemented(
                            "RecvTensor response: compressed gRPC messages are not supported",
                        ));
                    }
                    self.pos = 0;
                    self.message_end = u32::from_be_bytes([h[1], h[2], h[3], h[4]]) as usize;
                    self.at = At::Field;
                }
                At::Content => {
                    let Some(sink) = self.sink.as_mut() else {
                        return Err(malformed("no content buffer"));
                    };
                    let n = self
                        .queue
                        .consume(self.content_left, |b| sink.extend_from_slice(b));
                    self.pos += n;
                    self.content_left -= n;
                    if self.content_left > 0 {
                        return Ok(());
                    }
                    if !self.chunked {
                        self.content = self.sink.take();
                    }
                    self.at = At::Field;
                }
                At::Done => {
                    return match self.queue.len {
                        0 => Ok(()),
                        n => Err(malformed(&format!("{n} bytes after the message"))),
                    };
                }
                At::Field => {
                    if self.tensor_end == Some(self.pos) {
                        self.tensor_end = None;
                        continue;
                    }
                    if self.pos == self.message_end {
                        self.end_message()?;
                        continue;
                    }
                    if !self.field()? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// At the end of a message: the response is done, or (chunked) another
    /// message of its content follows.
    fn end_message(&mut self) -> Result<()> {
        if self.tensor_end.is_some() {
            return Err(malformed("the tensor runs past its message"));
        }
        if self.message == 0 && self.saw_options {
            let resp = RecvTensorResponse::decode(self.response_fields.as_slice())
                .map_err(|e| malformed(&e.to_string()))?;
            if let Some(any) = resp
                .transport_options
                .filter(|a| a.type_url == TENSOR_CHUNKS_URL)
            {
                let chunks = TensorChunks::decode(any.value.as_slice())
                    .map_err(|e| malformed(&e.to_string()))?;
                if self.content.is_some() {
                    return Err(malformed(
                        "a chunked response with content in its first message",
                    ));
                }
                let len = usize::try_from(chunks.content_bytes)
                    .map_err(|_| malformed("a huge content"))?;
                if len > 0 {
                    self.sink = Some(content_buffer(len)?);
                    self.chunked = true;
                }
            }
        }
        self.message += 1;
        self.at = match &self.sink {
            Some(sink) if self.chunked && sink.remaining() > 0 => At::Header,
            _ => At::Done,
        };
        Ok(())
    }

    /// Consumes the field at the front; false when it has not all arrived.
    fn field(&mut self) -> Result<bool> {
        let Some((key, klen)) = self.queue.varint(0)? else {
            return Ok(false);
        };
        let (tag, wire) = ((key >> 3) as u32, key & 7);
        let inside = self.tensor_end.is_some();
        let end = self.tensor_end.unwrap_or(self.message_end);
        if wire == WireType::LengthDelimited as u64
            && ((!inside && tag == RESPONSE_TENSOR) || (inside && tag == TENSOR_CONTENT))
        {
            let Some((len, llen)) = self.queue.varint(klen)? else {
                return Ok(false);
            };
            let len = usize::try_from(len).map_err(|_| malformed("a huge length"))?;
            let start = self.pos + klen + llen;
            if start.checked_add(len).is_none_or(|e| e > end) {
                return Err(malformed("a field runs past its message"));
            }
            if !inside {
                self.queue.skip(klen + llen);
                self.pos = start;
                self.tensor_end = Some(start + len);
                self.saw_tensor |= self.message == 0;
                // A repeated message field merges; its fields are re-read below.
                return Ok(true);
            }
            if self.chunked || len >= INLINE {
                self.queue.skip(klen + llen);
                self.pos = start;
                if self.chunked {
                    if self.sink.as_ref().is_none_or(|s| s.remaining() < len) {
                        return Err(malformed("chunks run past the content's size"));
                    }
                } else {
                    self.sink = Some(content_buffer(len)?);
                    self.content = None;
                }
                self.content_left = len;
                self.at = At::Content;
                return Ok(true);
            }
        }
        let body = match wire {
            0 => match self.queue.varint(klen)? {
                Some((_, n)) => n,
                None => return Ok(false),
            },
            1 => 8,
            5 => 4,
            2 => match self.queue.varint(klen)? {
                Some((len, n)) => usize::try_from(len)
                    .ok()
                    .and_then(|l| l.checked_add(n))
                    .ok_or_else(|| malformed("a huge length"))?,
                None => return Ok(false),
            },
            w => return Err(malformed(&format!("wire type {w}"))),
        };
        let total = klen + body;
        if self.pos.checked_add(total).is_none_or(|e| e > end) {
            return Err(malformed("a field runs past its message"));
        }
        if self.queue.len < total {
            return Ok(false);
        }
        if self.message > 0 {
            self.queue.skip(total);
        } else if inside {
            self.queue.take_into(total, &mut self.tensor_fields);
        } else {
            self.saw_options |= tag == RESPONSE_OPTIONS;
            self.queue.take_into(total, &mut self.response_fields);
        }
        self.pos += total;
        Ok(true)
    }

    /// The response's `is_dead` and its tensor, once the whole body has arrived.
    pub fn finish(self) -> Result<Option<Tensor>> {
        if !matches!(self.at, At::Done) {
            return Err(malformed("the body ended before the message"));
        }
        let resp = RecvTensorResponse::decode(self.response_fields.as_slice())
            .map_err(|e| malformed(&e.to_string()))?;
        if resp.is_dead {
            return Ok(None);
        }
        if !self.saw_tensor {
            return wire::tensor_of(None, "RecvTensor").map(Some);
        }
        let proto = TensorProto::decode(self.tensor_fields.as_slice())
            .map_err(|e| malformed(&e.to_string()))?;
        let content = if self.chunked {
            self.sink
        } else {
            self.content
        };
        match content.and_then(AlignedBufferBuilder::finish) {
            None => wire::tensor_of(Some(&proto), "RecvTensor").map(Some),
            Some(buffer) => {
                let dtype = graph::import::tensor::dtype_from_proto(proto.dtype)?;
                let shape =
                    graph::import::tensor::tensor_shape_from_proto(proto.tensor_shape.as_ref())?;
                Tensor::from_buffer(dtype, shape.dims(), buffer).map(Some)
            }
        }
    }
}

/// A response body of pieces known up front, then gRPC's OK trailers.
struct Pieces(VecDeque<Bytes>, bool);

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, Infallible>>> {
        if let Some(b) = self.0.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        if self.1 {
            return Poll::Ready(None);
        }
        self.1 = true;
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.1
    }
}

/// TensorFlow's `WorkerService` with `RecvTensor` answered by [`encode_response`]
/// and every other method by the generated service `S`.
#[derive(Clone)]
pub struct WorkerRoutes<S> {
    inner: S,
    state: Arc<WorkerState>,
}

impl<S> WorkerRoutes<S> {
    /// `inner` for every method but `RecvTensor`, served from `state`.
    pub fn new(inner: S, state: Arc<WorkerState>) -> WorkerRoutes<S> {
        WorkerRoutes { inner, state }
    }
}

impl<S: NamedService> NamedService for WorkerRoutes<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for WorkerRoutes<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<http::Response<Body>, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.uri().path() == RECV_TENSOR_PATH {
            let state = Arc::clone(&self.state);
            return Box::pin(async move { Ok(serve_recv_tensor(&state, req).await) });
        }
        Box::pin(self.inner.call(req))
    }
}

/// One `RecvTensor`, answered with the tensor's bytes uncopied or with a gRPC
/// status (trailers only).
async fn serve_recv_tensor(state: &WorkerState, req: http::Request<Body>) -> http::Response<Body> {
    let answer = async {
        let body = http_body_util::BodyExt::collect(http_body_util::Limited::new(
            req.into_body(),
            MAX_REQUEST,
        ))
        .await
        .map_err(|e| Status::invalid_argument(format!("RecvTensor request: {e}")))?
        .to_bytes();
        let request = unframe(body)?;
        let request = RecvTensorRequest::decode(request)
            .map_err(|e| Status::invalid_argument(format!("RecvTensor request: {e}")))?;
        let chunk = accepts_chunks(&request).then_some(CHUNK_BYTES);
        encode_response(state.recv_tensor(&request).await?, chunk)
    }
    .await;
    match answer {
        Ok(pieces) => {
            let mut resp = http::Response::new(Body::new(Pieces(pieces.into(), false)));
            resp.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/grpc"),
            );
            resp
        }
        Err(e) => wire::to_grpc(&e).into_http(),
    }
}

/// The one uncompressed message of a unary gRPC request body.
fn unframe(mut body: Bytes) -> Result<Bytes> {
    if body.len() < 5 {
        return Err(Status::invalid_argument(
            "RecvTensor request: no gRPC message",
        ));
    }
    if body[0] != 0 {
        return Err(Status::unimplemented(
            "RecvTensor request: compressed gRPC messages are not supported",
        ));
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    body.advance(5);
    if body.len() != len {
        return Err(Status::invalid_argument(format!(
            "RecvTensor request: a {len}-byte message in a {}-byte body",
            body.len()
        )));
    }
    Ok(body)
}

/// Why a call failed: a gRPC status of the peer, or the transport's error
/// (`peer` unreachable: the caller forgets its channel).
pub enum CallError {
    /// The peer answered with an error.
    Status(Status),
    /// The connection failed.
    Transport(Status),
}

/// One `RecvTensor` to the worker behind `channel`: the tensor (`None` when it
/// is dead), decoded by [`ResponseDecoder`]. Its buffer is charged to `charge`
/// (the receiving device's and step's counters, as TensorFlow allocates a
/// received tensor with the receiving device's allocator).
pub async fn recv_tensor(
    mut channel: Channel,
    request: &RecvTensorRequest,
    peer: &str,
    charge: Option<Charge>,
) -> std::result::Result<Option<Tensor>, CallError> {
    let transport = |e: &dyn std::fmt::Display| {
        CallError::Transport(Status::unavailable(format!(
            "RecvTensor to {peer} failed: {e}"
        )))
    };
    let body = grpc_frame(&request.encode_to_vec()).map_err(CallError::Status)?;
    let mut req = http::Request::new(Body::new(http_body_util::Full::new(body)));
    *req.method_mut() = http::Method::POST;
    *req.uri_mut() = http::Uri::from_static(RECV_TENSOR_PATH);
    let h = req.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    h.insert(http::header::TE, http::HeaderValue::from_static("trailers"));
    std::future::poll_fn(|cx| channel.poll_ready(cx))
        .await
        .map_err(|e| transport(&e))?;
    let resp = channel.call(req).await.map_err(|e| transport(&e))?;
    let peer_status = |s: tonic::Status| CallError::Status(wire::from_grpc(&s, peer));
    if let Some(s) = tonic::Status::from_header_map(resp.headers()) {
        if s.code() != tonic::Code::Ok {
            return Err(peer_status(s));
        }
    }
    if resp.status() != http::StatusCode::OK {
        return Err(transport(&format!("HTTP status {}", resp.status())));
    }
    let mut body = resp.into_body();
    let mut decoder = ResponseDecoder::new();
    let mut trailers_ok = false;
    while let Some(frame) = http_body_util::BodyExt::frame(&mut body).await {
        let frame = frame.map_err(|s| {
            if s.code() == tonic::Code::Unavailable || s.code() == tonic::Code::Unknown {
                transport(&s.message())
            } else {
                peer_status(s)
            }
        })?;
        match frame.into_data() {
            Ok(data) => {
                let _scope = charge.clone().map(ChargeScope::enter);
                decoder.push(data).map_err(CallError::Status)?
            }
            Err(frame) => {
                if let Some(t) = frame.trailers_ref() {
                    match tonic::Status::from_header_map(t) {
                        Some(s) if s.code() != tonic::Code::Ok => return Err(peer_status(s)),
                        Some(_) => trailers_ok = true,
                        None => {}
                    }
                }
            }
        }
    }
    if !trailers_ok {
        return Err(transport(&"the response ended without a gRPC status"));
    }
    let _scope = charge.map(ChargeScope::enter);
    decoder.finish().map_err(CallError::Status)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `pieces` to a decoder re-cut at every `cut` bytes.
    fn decode_cut(pieces: &[Bytes], cut: usize) -> Result<Option<Tensor>> {
        let whole: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
        let mut d = ResponseDecoder::new();
        for c in whole.chunks(cut) {
            d.push(Bytes::copy_from_slice(c))?;
        }
        d.finish()
    }

    fn response(t: &Tensor) -> RecvTensorResponse {
        RecvTensorResponse {
            tensor: Some(graph::import::tensor_to_content_proto(t)),
            send_start_micros: 1234,
            require_ack: true,
            ..Default::default()
        }
    }

    #[test]
    fn large_tensors_round_trip_through_any_chunking() {
        let big = Tensor::new(&[3, 5000], (0..15000).map(|i| i as f32 * 0.5).collect()).unwrap();
        let pieces = encode_response(response(&big), None).unwrap();
        assert_eq!(pieces.len(), 3, "the content travels as its own piece");
        // The content piece shares the tensor's buffer.
        assert_eq!(pieces[1].as_ptr(), big.as_bytes().unwrap().as_ptr());
        for cut in [1, 7, 4096, 16384, 1 << 20] {
            assert_eq!(
                decode_cut(&pieces, cut).unwrap(),
                Some(big.clone()),
                "cut {cut}"
            );
        }
        // prost reads the same bytes as the same message.
        let whole: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
        let back = RecvTensorResponse::decode(&whole[5..]).unwrap();
        assert_eq!(back.send_start_micros, 1234);
        assert!(back.require_ack);
        assert_eq!(wire::tensor_of(back.tensor.as_ref(), "t").unwrap(), big);
    }

    #[test]
    fn prost_encodings_decode_in_any_field_order() {
        // As another peer may send it: prost's encoding, content and all in one
        // piece, and the tensor field after the others.
        let big = Tensor::new(&[40000], (0..40000i32).collect()).unwrap();
        let mut resp = response(&big);
        let tensor = resp.tensor.take().unwrap();
        let mut body = resp.encode_to_vec();
        body.extend(
            RecvTensorResponse {
                tensor: Some(tensor),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        let framed = grpc_frame(&body).unwrap();
        for cut in [3, 1000, 100_000, 1 << 20] {
            assert_eq!(
                decode_cut(std::slice::from_ref(&framed), cut).unwrap(),
                Some(big.clone())
            );
        }
        // Small tensors, strings and dead tensors go inline.
        for t in [
            Tensor::scalar(2.5f64),
            Tensor::from_strings(&[2], vec!["a", "bc"]).unwrap(),
            Tensor::from_raw_bytes(graph::DType::Bool, &[3], &[0, 1, 1]).unwrap(),
        ] {
            let pieces = encode_response(response(&t), None).unwrap();
            assert_eq!(pieces.len(), 1);
            assert_eq!(decode_cut(&pieces, 2).unwrap(), Some(t));
        }
        let dead = RecvTensorResponse {
            is_dead: true,
            ..Default::default()
        };
        assert_eq!(
            decode_cut(&encode_response(dead, None).unwrap(), 1).unwrap(),
            None
        );
    }

    #[test]
    fn malformed_responses_are_data_loss_not_panics() {
        let big = Tensor::new(&[20000], vec![1.0f32; 20000]).unwrap();
        let pieces = encode_response(response(&big), None).unwrap();
        let whole: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
        // Truncated anywhere: an error at the end, never a tensor.
        for cut in [0, 3, 5, 9, 40, whole.len() / 2, whole.len() - 1] {
            let mut d = ResponseDecoder::new();
            d.push(Bytes::copy_from_slice(&whole[..cut])).unwrap();
            assert_eq!(
                d.finish().unwrap_err().code(),
                graph::Code::DataLoss,
                "cut {cut}"
            );
        }
        // Trailing garbage, a length past the message, a compressed message.
        let mut extra = whole.clone();
        extra.push(0);
        let mut d = ResponseDecoder::new();
        assert!(d.push(Bytes::from(extra)).is_err());
        let mut lying = whole.clone();
        // The tensor field's length (after the header and its key) far past the end.
        lying[6..10].copy_from_slice(&[0xff, 0xff, 0xff, 0x7f]);
        let mut d = ResponseDecoder::new();
        assert_eq!(
            d.push(Bytes::from(lying)).unwrap_err().code(),
            graph::Code::DataLoss
        );
        let mut d = ResponseDecoder::new();
        assert_eq!(
            d.push(Bytes::from_static(&[1, 0, 0, 0, 0]))
                .unwrap_err()
                .code(),
            graph::Code::Unimplemented
        );
        // A content whose size does not fit the shape.
        let mut resp = response(&big);
        if let Some(t) = resp.tensor.as_mut() {
            t.tensor_content = t.tensor_content.slice(4..);
        }
        let pieces = encode_response(resp, None).unwrap();
        assert_eq!(
            decode_cut(&pieces, 5000).unwrap_err().code(),
            graph::Code::InvalidArgument
        );
    }

    #[test]
    fn chunked_responses_round_trip_and_share_the_tensor() {
        let big = Tensor::new(&[25000], (0..25000i32).collect()).unwrap();
        let pieces = encode_response(response(&big), Some(40000)).unwrap();
        // The first message, then a header and a slice per chunk.
        assert_eq!(pieces.len(), 1 + 2 * 3);
        let base = big.as_bytes().unwrap().as_ptr();
        for (i, p) in pieces[2..].iter().step_by(2).enumerate() {
            assert_eq!(p.as_ptr(), base.wrapping_add(i * 40000));
        }
        for cut in [1, 5, 999, 40005, 1 << 20] {
            assert_eq!(
                decode_cut(&pieces, cut).unwrap(),
                Some(big.clone()),
                "cut {cut}"
            );
        }
        // The first message is a RecvTensorResponse as any peer reads it.
        let first = RecvTensorResponse::decode(&pieces[0][5..]).unwrap();
        assert_eq!(first.send_start_micros, 1234);
        let opts = first.transport_options.unwrap();
        assert_eq!(opts.type_url, TENSOR_CHUNKS_URL);
        assert_eq!(
            TensorChunks::decode(opts.value.as_slice())
                .unwrap()
                .content_bytes,
            100_000
        );
        // A content that fits one chunk goes unchunked.
        assert_eq!(
            encode_response(response(&big), Some(1 << 20))
                .unwrap()
                .len(),
            3
        );
        // The request says whether the caller reads chunks.
        let mut req = RecvTensorRequest::default();
        assert!(!accepts_chunks(&req));
        accept_chunks(&mut req);
        assert!(accepts_chunks(
            &RecvTensorRequest::decode(req.encode_to_vec().as_slice()).unwrap()
        ));
    }

    #[test]
    fn content_past_2_gib_needs_chunks() {
        // Zeroed memory that is never touched: no physical pages.
        let huge = Bytes::from(vec![0u8; (3usize << 30) + 8]);
        let resp = || RecvTensorResponse {
            tensor: Some(TensorProto {
                dtype: 1,
                tensor_content: huge.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let e = encode_response(resp(), None).unwrap_err();
        assert_eq!(e.code(), graph::Code::ResourceExhausted);
        assert!(e.message().contains("2 GiB"), "{e}");
        let pieces = encode_response(resp(), Some(CHUNK_BYTES)).unwrap();
        assert_eq!(pieces.len(), 1 + 2 * 4);
        let content: usize = pieces[2..].iter().step_by(2).map(Bytes::len).sum();
        assert_eq!(content, huge.len());
    }

    #[test]
    fn malformed_chunked_responses_are_data_loss() {
        let big = Tensor::new(&[30000], vec![2.0f32; 30000]).unwrap();
        let pieces = encode_response(response(&big), Some(50000)).unwrap();
        // A chunk missing: the body ends early.
        let short = &pieces[..pieces.len() - 2];
        assert_eq!(
            decode_cut(short, 1000).unwrap_err().code(),
            graph::Code::DataLoss
        );
        // A chunk too many.
        let mut long = pieces.clone();
        long.extend_from_slice(&pieces[pieces.len() - 2..]);
        assert_eq!(
            decode_cut(&long, 1000).unwrap_err().code(),
            graph::Code::DataLoss
        );
        // A first message that already holds content.
        let mut resp = response(&big);
        resp.transport_options = Some(prost_types::Any {
            type_url: TENSOR_CHUNKS_URL.into(),
            value: TensorChunks {
                content_bytes: 120_000,
            }
            .encode_to_vec(),
        });
        let framed = grpc_frame(&resp.encode_to_vec()).unwrap();
        assert_eq!(
            decode_cut(std::slice::from_ref(&framed), 7)
                .unwrap_err()
                .code(),
            graph::Code::DataLoss
        );
    }
}
