//! [`Reader`]: the building blocks the message parsers of [`super::parse`] are made
//! of. It reads a message's fields one name at a time, nested messages (`{…}` or
//! `<…>`, at most [`MAX_DEPTH`] deep), scalar values with their required `:`,
//! repeated values in either form (`f: 1 f: 2` or `f: [1, 2]`), and skips the fields
//! a message chooses to ignore.

use super::lexer::{Lexer, Tok};
use crate::proto::types::TfDataType;
use crate::{Result, Status};

/// The deepest nesting of messages accepted (the limit prost applies to binary
/// input too).
pub const MAX_DEPTH: usize = 100;

/// Reads a message body; `close` is the byte that ends it (`None` at the top level,
/// which ends at the end of the input).
pub(crate) type BodyFn<'a, T> = fn(&mut Reader<'a>, Option<u8>) -> Result<T>;

/// Reads one scalar value, after the `:`.
pub(crate) type ValueFn<'a, T> = fn(&mut Reader<'a>) -> Result<T>;

/// The parser state: a lexer and the current nesting depth.
pub(crate) struct Reader<'a> {
    lx: Lexer<'a>,
    depth: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `src`.
    pub(crate) fn new(src: &'a str) -> Reader<'a> {
        Reader {
            lx: Lexer::new(src),
            depth: 0,
        }
    }

    /// A syntax error at the current position.
    pub(crate) fn error(&self, msg: impl std::fmt::Display) -> Status {
        self.lx.error(msg)
    }

    /// The error for a field the message does not have.
    pub(crate) fn unknown_field(&self, message: &str, field: &str) -> Status {
        self.error(format!("message {message} has no field named '{field}'"))
    }

    /// The name of the next field of a message ending with `close`, or `None` at its
    /// end (the closing byte is consumed). Separators `,` and `;` between fields are
    /// accepted.
    pub(crate) fn next_field(&mut self, close: Option<u8>) -> Result<Option<String>> {
        while self.lx.eat(b',')? || self.lx.eat(b';')? {}
        match self.lx.next_tok()? {
            Tok::Ident(s) => Ok(Some(s)),
            Tok::Punct(c) if Some(c) == close => Ok(None),
            Tok::Eof if close.is_none() => Ok(None),
            Tok::Punct(b'[') => {
                Err(self.error("extension and Any fields ('[…]') are not supported"))
            }
            Tok::Eof => Err(self.error("unexpected end of input inside a message")),
            t => Err(self.error(format!("expected a field name, found {}", t.describe()))),
        }
    }

    /// Reads a nested message value: an optional `:`, then `{…}` or `<…>`.
    pub(crate) fn message<T>(&mut self, body: BodyFn<'a, T>) -> Result<T> {
        self.lx.eat(b':')?;
        self.message_body(body)
    }

    fn message_body<T>(&mut self, body: BodyFn<'a, T>) -> Result<T> {
        let close = match self.lx.next_tok()? {
            Tok::Punct(b'{') => b'}',
            Tok::Punct(b'<') => b'>',
            t => {
                return Err(self.error(format!(
                    "expected '{{' to open a message, found {}",
                    t.describe()
                )))
            }
        };
        if self.depth >= MAX_DEPTH {
            return Err(self.error(format!("messages are nested more than {MAX_DEPTH} deep")));
        }
        self.depth += 1;
        let r = body(self, Some(close));
        self.depth -= 1;
        r
    }

    /// Reads one value of a repeated message field (`f {…}`) or a list of them
    /// (`f: [{…}, {…}]`), appending to `out`.
    pub(crate) fn messages<T>(&mut self, out: &mut Vec<T>, body: BodyFn<'a, T>) -> Result<()> {
        let colon = self.lx.eat(b':')?;
        if colon && self.lx.eat(b'[')? {
            return self.list_items(|r| {
                let v = r.message_body(body)?;
                out.push(v);
                Ok(())
            });
        }
        out.push(self.message_body(body)?);
        Ok(())
    }

    /// Reads a singular scalar field's `:` and value.
    pub(crate) fn scalar<T>(&mut self, value: ValueFn<'a, T>) -> Result<T> {
        self.colon()?;
        value(self)
    }

    /// Reads a repeated scalar field's value (`f: v`) or list (`f: [v, w]`),
    /// appending to `out`.
    pub(crate) fn repeated<T>(&mut self, out: &mut Vec<T>, value: ValueFn<'a, T>) -> Result<()> {
        self.colon()?;
        if self.lx.eat(b'[')? {
            return self.list_items(|r| {
                out.push(value(r)?);
                Ok(())
            });
        }
        out.push(value(self)?);
        Ok(())
    }

    /// Reads comma-separated items up to `]` (the `[` already consumed).
    fn list_items(&mut self, mut item: impl FnMut(&mut Self) -> Result<()>) -> Result<()> {
        if self.lx.eat(b']')? {
            return Ok(());
        }
        loop {
            item(self)?;
            if self.lx.eat(b']')? {
                return Ok(());
            }
            if !self.lx.eat(b',')? {
                let t = self.lx.peek()?.describe();
                return Err(self.error(format!("expected ',' or ']' in a list, found {t}")));
            }
        }
    }

    fn colon(&mut self) -> Result<()> {
        if self.lx.eat(b':')? {
            return Ok(());
        }
        let t = self.lx.peek()?.describe();
        Err(self.error(format!("expected ':' before a value, found {t}")))
    }

    /// A string literal as raw bytes.
    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>> {
        match self.lx.next_tok()? {
            Tok::Str(b) => Ok(b),
            t => Err(self.error(format!("expected a string, found {}", t.describe()))),
        }
    }

    /// A string literal as a `bytes::Bytes` (for the fields the proto crate shares).
    pub(crate) fn shared_bytes(&mut self) -> Result<bytes::Bytes> {
        self.bytes().map(bytes::Bytes::from)
    }

    /// A string literal that must be UTF-8.
    pub(crate) fn string(&mut self) -> Result<String> {
        let b = self.bytes()?;
        String::from_utf8(b).map_err(|_| self.error("string field holds invalid UTF-8"))
    }

    /// An integer literal (decimal, `0x` hex or `0` octal, optionally negative) that
    /// fits `T`.
    pub(crate) fn int<T: TryFrom<i128>>(&mut self) -> Result<T> {
        let neg = self.lx.eat(b'-')?;
        let text = match self.lx.next_tok()? {
            Tok::Num(s) => s,
            t => return Err(self.error(format!("expected an integer, found {}", t.describe()))),
        };
        let (digits, radix) =
            if let Some(h) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
                (h, 16)
            } else if let Some(o) = text.strip_prefix('0').filter(|o| !o.is_empty()) {
                (o, 8)
            } else {
                (text.as_str(), 10)
            };
        let valid = !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix));
        let magnitude = valid
            .then(|| u64::from_str_radix(digits, radix).ok())
            .flatten()
            .ok_or_else(|| self.error(format!("'{text}' is not a valid integer")))?;
        let v = if neg {
            -i128::from(magnitude)
        } else {
            i128::from(magnitude)
        };
        T::try_from(v).map_err(|_| {
            let sign = if neg { "-" } else { "" };
            self.error(format!(
                "integer {sign}{text} is out of range for its field"
            ))
        })
    }

    /// A floating-point literal: its sign and either its text (without an `f`
    /// suffix) or, for `inf`, `infinity` and `nan` in any case, `Err(is_nan)`.
    fn float_literal(&mut self) -> Result<(bool, std::result::Result<String, bool>)> {
        let neg = self.lx.eat(b'-')?;
        let lit = match self.lx.next_tok()? {
            Tok::Num(s) => {
                let body = s.strip_suffix(['f', 'F']).unwrap_or(&s);
                if body.starts_with("0x") || body.starts_with("0X") {
                    return Err(self.error(format!("'{s}' is not a valid number")));
                }
                Ok(body.to_owned())
            }
            Tok::Ident(s) => match s.to_ascii_lowercase().as_str() {
                "inf" | "inff" | "infinity" | "infinityf" => Err(false),
                "nan" | "nanf" => Err(true),
                _ => return Err(self.error(format!("expected a number, found '{s}'"))),
            },
            t => return Err(self.error(format!("expected a number, found {}", t.describe()))),
        };
        Ok((neg, lit))
    }

    /// A `double` value: a number (optionally with an `f` suffix), `inf`,
    /// `infinity` or `nan` in any case, optionally negative.
    pub(crate) fn float64(&mut self) -> Result<f64> {
        let (neg, lit) = self.float_literal()?;
        let v = match lit {
            Ok(s) => s
                .parse::<f64>()
                .map_err(|_| self.error(format!("'{s}' is not a valid number")))?,
            Err(true) => f64::NAN,
            Err(false) => f64::INFINITY,
        };
        Ok(if neg { -v } else { v })
    }

    /// A `float` value, in the syntax of [`Reader::float64`], rounded once to `f32`.
    pub(crate) fn float32(&mut self) -> Result<f32> {
        let (neg, lit) = self.float_literal()?;
        let v = match lit {
            Ok(s) => s
                .parse::<f32>()
                .map_err(|_| self.error(format!("'{s}' is not a valid number")))?,
            Err(true) => f32::NAN,
            Err(false) => f32::INFINITY,
        };
        Ok(if neg { -v } else { v })
    }

    /// A `bool` value: `true`, `false`, `True`, `False`, `t`, `f`, `1` or `0`.
    pub(crate) fn boolean(&mut self) -> Result<bool> {
        match self.lx.next_tok()? {
            Tok::Ident(s) if matches!(s.as_str(), "true" | "True" | "t") => Ok(true),
            Tok::Ident(s) if matches!(s.as_str(), "false" | "False" | "f") => Ok(false),
            Tok::Num(s) if s == "1" => Ok(true),
            Tok::Num(s) if s == "0" => Ok(false),
            t => Err(self.error(format!("expected true or false, found {}", t.describe()))),
        }
    }

    /// A `DataType` value, by name (`DT_FLOAT`) or number.
    pub(crate) fn dtype(&mut self) -> Result<i32> {
        if let Tok::Ident(s) = self.lx.peek()? {
            let s = s.clone();
            self.lx.next_tok()?;
            return TfDataType::from_str_name(&s)
                .map(|t| t as i32)
                .ok_or_else(|| self.error(format!("unknown DataType '{s}'")));
        }
        self.int::<i32>()
    }

    /// Skips the value of a field the message ignores, whatever its form.
    pub(crate) fn skip_field(&mut self) -> Result<()> {
        let colon = self.lx.eat(b':')?;
        match self.lx.peek()? {
            Tok::Punct(b'{' | b'<' | b'[') => self.skip_balanced(),
            _ if colon => self.skip_scalar(),
            t => {
                let t = t.describe();
                Err(self.error(format!(
                    "expected ':' or '{{' after a field name, found {t}"
                )))
            }
        }
    }

    fn skip_scalar(&mut self) -> Result<()> {
        self.lx.eat(b'-')?;
        match self.lx.next_tok()? {
            Tok::Ident(_) | Tok::Num(_) | Tok::Str(_) => Ok(()),
            t => Err(self.error(format!("expected a value, found {}", t.describe()))),
        }
    }

    /// Skips a bracketed group and everything inside it, without recursion.
    fn skip_balanced(&mut self) -> Result<()> {
        let mut depth = 0usize;
        loop {
            match self.lx.next_tok()? {
                Tok::Punct(b'{' | b'<' | b'[') => depth += 1,
                Tok::Punct(b'}' | b'>' | b']') => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Ok(());
                    }
                }
                Tok::Eof => {
                    return Err(self.error("unexpected end of input inside a skipped field"))
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value<'a, T>(src: &'a str, f: ValueFn<'a, T>) -> Result<T> {
        let mut r = Reader::new(src);
        f(&mut r)
    }

    #[test]
    fn integers_floats_bools_and_types() {
        assert_eq!(value("-12", Reader::int::<i64>).unwrap(), -12);
        assert_eq!(value("0x1f", Reader::int::<i32>).unwrap(), 31);
        assert_eq!(value("017", Reader::int::<i32>).unwrap(), 15);
        assert_eq!(value("0", Reader::int::<u64>).unwrap(), 0);
        assert!(value("4294967296", Reader::int::<i32>).is_err());
        assert!(value("-1", Reader::int::<u32>).is_err());
        assert!(value("1.5", Reader::int::<i64>).is_err());
        assert!(value("99999999999999999999999", Reader::int::<i64>).is_err());
        assert!(value("09", Reader::int::<i64>).is_err());
        assert_eq!(value("1.5e2", Reader::float64).unwrap(), 150.0);
        assert_eq!(value("2f", Reader::float32).unwrap(), 2.0);
        assert_eq!(value("-inf", Reader::float32).unwrap(), f32::NEG_INFINITY);
        assert!(value("NaN", Reader::float32).unwrap().is_nan());
        assert!(value("0x10", Reader::float32).is_err());
        assert!(value("1..2", Reader::float32).is_err());
        assert!(value("True", Reader::boolean).unwrap());
        assert!(!value("0", Reader::boolean).unwrap());
        assert!(value("2", Reader::boolean).is_err());
        assert_eq!(value("DT_HALF", Reader::dtype).unwrap(), 19);
        assert_eq!(value("101", Reader::dtype).unwrap(), 101);
        assert!(value("DT_NOPE", Reader::dtype).is_err());
    }

    #[test]
    fn skipping_and_lists() {
        fn body(r: &mut Reader<'_>, close: Option<u8>) -> Result<Vec<i64>> {
            let mut v = vec![];
            while let Some(f) = r.next_field(close)? {
                match f.as_str() {
                    "x" => r.repeated(&mut v, Reader::int::<i64>)?,
                    _ => r.skip_field()?,
                }
            }
            Ok(v)
        }
        let mut r = Reader::new("x: 1 skip { a: [1, {b: 2}] c <d: 'e'> } x: [2, 3], y: -4; x: []");
        assert_eq!(body(&mut r, None).unwrap(), [1, 2, 3]);
        for bad in [
            "x 1",
            "x: [1 2]",
            "x: [1,",
            "skip { a: 1",
            "x: 1 }",
            "[ext]: 1",
            "y {",
        ] {
            assert!(body(&mut Reader::new(bad), None).is_err(), "{bad}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        fn body(r: &mut Reader<'_>, close: Option<u8>) -> Result<()> {
            while r.next_field(close)?.is_some() {
                r.message(body)?;
            }
            Ok(())
        }
        let ok = "a { ".repeat(MAX_DEPTH) + &"} ".repeat(MAX_DEPTH);
        assert!(body(&mut Reader::new(&ok), None).is_ok());
        let deep = "a { ".repeat(100_000);
        let e = body(&mut Reader::new(&deep), None).unwrap_err();
        assert!(e.message().contains("nested"), "{e}");
    }
}
