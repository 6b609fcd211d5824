//! rapidjson's `PrettyWriter` as TensorFlow Serving uses it, and the
//! number formats it writes.
//!
//! The layout: four spaces of indent per level; an object's members one per
//! line (`"key": value`); an array's items one per line, or, while
//! single-line arrays are on (TensorFlow Serving turns them on for each
//! instance of a row-format response), separated by `, ` with no line
//! breaks. The switch is read as each token is written, as rapidjson reads
//! its format flag, which is what gives TensorFlow Serving's responses their
//! shape (`"predictions": [[1.0, 2.0], [3.0, 4.0]` and then the closing
//! bracket on a line of its own).

use super::reader::{Number, Value};

#[derive(Clone, Copy, Debug)]
struct Level {
    in_array: bool,
    values: usize,
}

/// rapidjson's `PrettyWriter<StringBuffer>`; see the module docs. Strings
/// are bytes and are written as given (invalid UTF-8 included), escaping
/// `"`, `\` and control characters as rapidjson does.
#[derive(Debug, Default)]
pub struct PrettyWriter {
    out: Vec<u8>,
    stack: Vec<Level>,
    single_line_arrays: bool,
    /// Stop writing once the output reaches this many bytes (for error
    /// messages).
    limit: Option<usize>,
}

impl PrettyWriter {
    /// An empty writer.
    pub fn new() -> PrettyWriter {
        PrettyWriter::default()
    }

    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.out
    }

    /// rapidjson's `kFormatSingleLineArray` on or off.
    pub fn set_single_line_arrays(&mut self, on: bool) {
        self.single_line_arrays = on;
    }

    /// False once a limit is set and reached: nothing more is written.
    fn in_limit(&self) -> bool {
        self.limit.is_none_or(|l| self.out.len() < l)
    }

    fn indent(&mut self) {
        let n = self.stack.len() * 4;
        self.out.extend(std::iter::repeat_n(b' ', n));
    }

    /// What goes before a value (rapidjson's `PrettyPrefix`).
    fn prefix(&mut self) {
        let single = self.single_line_arrays;
        let Some(level) = self.stack.last().copied() else {
            return;
        };
        if level.in_array {
            if level.values > 0 {
                self.out.push(b',');
                if single {
                    self.out.push(b' ');
                }
            }
            if !single {
                self.out.push(b'\n');
                self.indent();
            }
        } else {
            if level.values > 0 {
                if level.values % 2 == 0 {
                    self.out.extend_from_slice(b",\n");
                } else {
                    self.out.extend_from_slice(b": ");
                }
            } else {
                self.out.push(b'\n');
            }
            if level.values % 2 == 0 {
                self.indent();
            }
        }
        if let Some(l) = self.stack.last_mut() {
            l.values += 1;
        }
    }

    /// `{`.
    pub fn start_object(&mut self) -> bool {
        if !self.in_limit() {
            return false;
        }
        self.prefix();
        self.out.push(b'{');
        self.stack.push(Level {
            in_array: false,
            values: 0,
        });
        true
    }

    /// `}`.
    pub fn end_object(&mut self) -> bool {
        if !self.in_limit() {
            return false;
        }
        let empty = self.stack.pop().is_none_or(|l| l.values == 0);
        if !empty {
            self.out.push(b'\n');
            self.indent();
        }
        self.out.push(b'}');
        true
    }

    /// `[`.
    pub fn start_array(&mut self) -> bool {
        if !self.in_limit() {
            return false;
        }
        self.prefix();
        self.out.push(b'[');
        self.stack.push(Level {
            in_array: true,
            values: 0,
        });
        true
    }

    /// `]`.
    pub fn end_array(&mut self) -> bool {
        if !self.in_limit() {
            return false;
        }
        let empty = self.stack.pop().is_none_or(|l| l.values == 0);
        if !empty && !self.single_line_arrays {
            self.out.push(b'\n');
            self.indent();
        }
        self.out.push(b']');
        true
    }

    /// An object's key.
    pub fn key(&mut self, s: &[u8]) -> bool {
        self.string(s)
    }

    /// A string.
    pub fn string(&mut self, s: &[u8]) -> bool {
        if !self.in_limit() {
            return false;
        }
        self.prefix();
        self.out.push(b'"');
        for &b in s {
            match b {
                b'"' => self.out.extend_from_slice(b"\\\""),
                b'\\' => self.out.extend_from_slice(b"\\\\"),
                0x08 => self.out.extend_from_slice(b"\\b"),
                0x0C => self.out.extend_from_slice(b"\\f"),
                b'\n' => self.out.extend_from_slice(b"\\n"),
                b'\r' => self.out.extend_from_slice(b"\\r"),
                b'\t' => self.out.extend_from_slice(b"\\t"),
                b if b < 0x20 => {
                    const HEX: &[u8; 16] = b"0123456789ABCDEF";
                    self.out.extend_from_slice(b"\\u00");
                    self.out.push(HEX[usize::from(b >> 4)]);
                    self.out.push(HEX[usize::from(b & 0xF)]);
                }
                b => self.out.push(b),
            }
        }
        self.out.push(b'"');
        true
    }

    /// A number written as given (rapidjson's `RawValue` of a number).
    pub fn raw_number(&mut self, s: &str) -> bool {
        if !self.in_limit() {
            return false;
        }
        self.prefix();
        self.out.extend_from_slice(s.as_bytes());
        true
    }

    /// A signed integer.
    pub fn int(&mut self, v: i64) -> bool {
        self.raw_number(&v.to_string())
    }

    /// An unsigned integer.
    pub fn uint(&mut self, v: u64) -> bool {
        self.raw_number(&v.to_string())
    }

    /// `true` or `false`.
    pub fn bool(&mut self, v: bool) -> bool {
        self.raw_number(if v { "true" } else { "false" })
    }

    /// `null`.
    pub fn null(&mut self) -> bool {
        self.raw_number("null")
    }

    /// Writes `v` (rapidjson's `Value::Accept`); false when writing
    /// stopped (at the limit, or at a non-finite double, which rapidjson's
    /// writer refuses).
    fn value(&mut self, v: Value<'_>) -> bool {
        use super::reader::JsonType;
        match v.json_type() {
            JsonType::Null => self.null(),
            JsonType::False => self.bool(false),
            JsonType::True => self.bool(true),
            JsonType::String => self.string(v.as_bytes().unwrap_or_default()),
            JsonType::Number => match v.number() {
                Some(Number::Int(i)) => self.int(i),
                Some(Number::Uint(u)) => self.uint(u),
                Some(Number::Double(d)) => match rapidjson_dtoa(d) {
                    Some(s) => self.raw_number(&s),
                    None => false,
                },
                None => false,
            },
            JsonType::Object => {
                if !self.start_object() {
                    return false;
                }
                for (k, m) in v.members() {
                    if !self.key(k) || !self.value(m) {
                        return false;
                    }
                }
                self.end_object()
            }
            JsonType::Array => {
                if !self.start_array() {
                    return false;
                }
                for item in v.items() {
                    if !self.value(item) {
                        return false;
                    }
                }
                self.end_array()
            }
        }
    }
}

/// How TensorFlow Serving quotes a JSON value in an error message
/// (`JsonValueToDebugString`): pretty-printed with single-line arrays,
/// stopping at the first token that would start past 256 bytes.
pub fn debug_string(v: Value<'_>) -> Vec<u8> {
    let mut w = PrettyWriter {
        single_line_arrays: true,
        limit: Some(256),
        ..PrettyWriter::default()
    };
    // Each level of nesting writes at least one byte, so the recursion
    // stops within 256 levels.
    w.value(v);
    w.out
}

/// A `float` as TensorFlow Serving writes it (`WriteDecimal<float>`): six
/// significant digits (`%g`) when they read back as the same float, else
/// nine; `.0` appended to a number with neither a point nor an exponent;
/// `NaN`, `Infinity`, `-Infinity` bare.
pub fn decimal_f32(v: f32) -> String {
    decimal(f64::from(v), |s| s.parse::<f32>().ok().map(f64::from), 9)
}

/// A `double` as TensorFlow Serving writes it: as [`decimal_f32`], with
/// seventeen digits when six do not read back.
pub fn decimal_f64(v: f64) -> String {
    decimal(v, |s| s.parse::<f64>().ok(), 17)
}

fn decimal(v: f64, read: impl Fn(&str) -> Option<f64>, max_digits: usize) -> String {
    if v.is_nan() {
        return "NaN".to_owned();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-Infinity" } else { "Infinity" }.to_owned();
    }
    let mut s = format_g(v, 6);
    if read(&s) != Some(v) {
        s = format_g(v, max_digits);
    }
    if !s.contains('.') && !s.contains('e') {
        s.push_str(".0");
    }
    s
}

/// C's `printf("%.{precision}g", v)` of a finite `v`.
pub fn format_g(v: f64, precision: usize) -> String {
    let p = precision.max(1);
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // The exponent after rounding to p significant digits decides the style.
    let sci = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let mantissa = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{v:.decimals$}")).to_owned()
    }
}

/// `1.2300` → `1.23`, `4.000` → `4`; numbers without a point unchanged.
fn strip_zeros(s: &str) -> &str {
    if !s.contains('.') {
        return s;
    }
    s.trim_end_matches('0').trim_end_matches('.')
}

/// rapidjson's `Writer::Double` (Grisu2's shortest digits, `Prettify`'s
/// layout: `1.0`, `0.001`, `1e30`, `1.5e-7`); `None` for NaN and the
/// infinities, which it refuses.
pub fn rapidjson_dtoa(d: f64) -> Option<String> {
    if !d.is_finite() {
        return None;
    }
    if d == 0.0 {
        return Some(if d.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned());
    }
    let sci = format!("{:e}", d.abs());
    let (mantissa, exp) = sci.split_once('e')?;
    let exp: i32 = exp.parse().ok()?;
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let length = digits.len() as i32;
    // value = digits × 10^k; kk = the decimal exponent of the first digit + 1.
    let kk = exp + 1;
    let k = kk - length;
    let mut out = String::new();
    if d < 0.0 {
        out.push('-');
    }
    if (0..).contains(&k) && kk <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', k as usize));
        out.push_str(".0");
    } else if 0 < kk && kk <= 21 {
        out.push_str(&digits[..kk as usize]);
        out.push('.');
        out.push_str(&digits[kk as usize..]);
    } else if -6 < kk && kk <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-kk) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if length > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push_str(&(kk - 1).to_string());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    //! Numbers as TensorFlow Serving's `json_tensor_test.cc` expects them
    //! written.

    use super::*;

    #[test]
    fn floats_are_written_as_tensorflow_serving_writes_them() {
        // json_tensor_test.cc's FromJsonSingleFloatTensorSixDigitPrecision.
        let cases: [(f32, &str); 14] = [
            (9000000.0, "9e+06"),
            (999999.0, "999999.0"),
            (0.5, "0.5"),
            (0.0003, "0.0003"),
            (0.00003, "3e-05"),
            (555557.5, "555557.5"),
            (0.1, "0.1"),
            (2.0, "2.0"),
            (-0.0, "-0.0"),
            (1435774380.0, "1.43577434e+09"),
            (0.447_510_15, "0.447510153"),
            (f32::MAX, "3.40282347e+38"),
            (1e-7, "1e-07"),
            (100000.0, "100000.0"),
        ];
        for (v, want) in cases {
            assert_eq!(decimal_f32(v), want, "{v:e}");
        }
        assert_eq!(decimal_f32(f32::NAN), "NaN");
        assert_eq!(decimal_f32(f32::INFINITY), "Infinity");
        assert_eq!(decimal_f32(f32::NEG_INFINITY), "-Infinity");
        assert_eq!(decimal_f64(0.1), "0.1");
        assert_eq!(decimal_f64(6.625), "6.625");
        assert_eq!(decimal_f64(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(decimal_f64(0.123456789), "0.123456789");
        assert_eq!(decimal_f64(1e100), "1e+100");
        assert_eq!(format_g(123456789.0, 9), "123456789");
        assert_eq!(format_g(0.0001, 6), "0.0001");
        assert_eq!(format_g(999999.5, 6), "1e+06");
    }

    #[test]
    fn debug_doubles_are_written_as_rapidjson_writes_them() {
        let cases = [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-2.5, "-2.5"),
            (1e30, "1e30"),
            (1.5e-7, "1.5e-7"),
            (0.001, "0.001"),
            (123.456, "123.456"),
            (1e20, "100000000000000000000.0"),
            (1e21, "1e21"),
            (0.0, "0.0"),
        ];
        for (v, want) in cases {
            assert_eq!(rapidjson_dtoa(v).as_deref(), Some(want), "{v:e}");
        }
        assert_eq!(rapidjson_dtoa(f64::NAN), None);
    }
}
