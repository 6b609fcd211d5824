//! The reader's errors, numbers and strings, as rapidjson gives them.

use super::*;

fn parse_err(json: &str) -> String {
    Document::parse(json.as_bytes())
        .unwrap_err()
        .message()
        .to_owned()
}

#[test]
fn parse_errors_carry_rapidjsons_messages_and_offsets() {
    assert_eq!(parse_err(""), "JSON Parse error: The document is empty");
    let cases = [
        ("   ", "The document is empty. at offset: 3"),
        ("]", "The document is empty. at offset: 0"),
        ("instances = [1, 2]", "Invalid value. at offset: 0"),
        (
            "{\"a\" 1}",
            "Missing a colon after a name of object member. at offset: 5",
        ),
        (
            "[1 2]",
            "Missing a comma or ']' after an array element. at offset: 3",
        ),
        (
            "{\"a\":1 \"b\":2}",
            "Missing a comma or '}' after an object member. at offset: 7",
        ),
        ("{1:2}", "Missing a name for object member. at offset: 1"),
        (
            "{\"a\":1,}",
            "Missing a name for object member. at offset: 7",
        ),
        ("[1,]", "Invalid value. at offset: 3"),
        ("[", "Invalid value. at offset: 1"),
        ("{", "Missing a name for object member. at offset: 1"),
        (
            "{\"a\"",
            "Missing a colon after a name of object member. at offset: 4",
        ),
        ("{\"a\":", "Invalid value. at offset: 5"),
        (
            "{\"a\":1",
            "Missing a comma or '}' after an object member. at offset: 6",
        ),
        (
            "[1",
            "Missing a comma or ']' after an array element. at offset: 2",
        ),
        (
            "\"abc",
            "Missing a closing quotation mark in string. at offset: 4",
        ),
        (
            "\"a\\x\"",
            "Invalid escape character in string. at offset: 2",
        ),
        (
            "\"\\u12G4\"",
            "Incorrect hex digit after \\u escape in string. at offset: 1",
        ),
        (
            "\"\\uD800\"",
            "The surrogate pair in string is invalid. at offset: 1",
        ),
        (
            "\"\\uD800\\u0041\"",
            "The surrogate pair in string is invalid. at offset: 1",
        ),
        ("[\"a\u{1}\"]", "Invalid encoding in string. at offset: 3"),
        ("[1.]", "Miss fraction part in number. at offset: 3"),
        ("[1e]", "Miss exponent in number. at offset: 3"),
        ("[-]", "Invalid value. at offset: 2"),
        (
            "[1e400]",
            "Number too big to be stored in double. at offset: 1",
        ),
        ("[nul]", "Invalid value. at offset: 4"),
        ("[Infinit]", "Invalid value. at offset: 8"),
        ("[Nan]", "Invalid value. at offset: 3"),
        ("[1,\0 2]", "Invalid value. at offset: 3"),
    ];
    for (json, want) in cases {
        assert_eq!(
            parse_err(json),
            format!("JSON Parse error: {want}"),
            "{json:?}"
        );
    }
}

#[test]
fn reader_tells_numbers_apart_as_rapidjson_does() {
    let doc = Document::parse(
        b"[1, 1.0, -0, 2147483648, 9223372036854775808, 18446744073709551616, \
              -9223372036854775808, -9223372036854775809, NaN, -Infinity, Inf, 1e2, 0.1]",
    )
    .unwrap();
    let v: Vec<_> = doc.root().items().collect();
    assert_eq!((v[0].as_i32(), v[0].as_double()), (Some(1), None));
    assert_eq!((v[1].as_i32(), v[1].as_double()), (None, Some(1.0)));
    assert_eq!(v[2].as_i64(), Some(0));
    assert_eq!(
        (v[3].as_i32(), v[3].as_u32(), v[3].as_i64()),
        (None, Some(1 << 31), Some(1 << 31))
    );
    assert_eq!((v[4].as_i64(), v[4].as_u64()), (None, Some(1 << 63)));
    assert_eq!(
        (v[5].as_u64(), v[5].as_double()),
        (None, Some(18446744073709551616.0))
    );
    assert_eq!(v[6].as_i64(), Some(i64::MIN));
    assert_eq!(
        (v[7].as_i64(), v[7].as_double()),
        (None, Some(-9223372036854775809.0))
    );
    assert!(v[8].as_double().unwrap().is_nan());
    assert_eq!(v[9].as_double(), Some(f64::NEG_INFINITY));
    assert_eq!(v[10].as_double(), Some(f64::INFINITY));
    assert_eq!(v[11].as_double(), Some(100.0));
    assert_eq!(v[12].as_double(), Some(0.1));
    assert!(v.iter().all(|x| x.json_type() == JsonType::Number));
}

#[test]
fn reader_strings_escapes_bom_and_trailing_input() {
    let doc = Document::parse(
        "\u{FEFF}{\"s\": \"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\", \"s\": 2} trailing"
            .as_bytes(),
    )
    .unwrap();
    let root = doc.root();
    assert_eq!(root.len(), 2, "duplicate keys are kept");
    assert_eq!(
        root.find("s").unwrap().as_bytes().unwrap(),
        "a\"\\/\u{8}\u{c}\n\r\té😀".as_bytes()
    );
    // Invalid UTF-8 passes through, as rapidjson does not validate.
    let doc = Document::parse(b"[\"\xff\xfe\"]").unwrap();
    assert_eq!(doc.root().item(0).unwrap().as_bytes().unwrap(), b"\xff\xfe");
}
