//! File globbing for `MatchingFiles` (TensorFlow's `GetMatchingPaths`), over
//! `std::fs`.
//!
//! A pattern is split on `/`; components with wildcards are matched against the
//! entries of the directories reached so far with [`fnmatch`] (`*` any run of
//! characters, `?` one character, `[...]` a class with ranges and `!`/`^`
//! negation, `\` escaping; no component ever matches across `/`, dot files
//! included), literal components are just appended. A pattern without wildcards
//! matches itself if it exists. Unreadable directories match nothing; there are no
//! errors.

use std::fs;
use std::path::Path;

/// True when `s` holds a wildcard character.
fn has_wildcard(s: &str) -> bool {
    s.bytes().any(|b| matches!(b, b'*' | b'?' | b'[' | b'\\'))
}

/// Matches `c` against the class starting after `[` at `p[i..]`: whether it
/// matched and the index after `]`, or `None` when the class is not closed.
fn match_class(p: &[u8], mut i: usize, c: u8) -> Option<(bool, usize)> {
    let negate = matches!(p.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let mut lo = *p.get(i)?;
        if lo == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if lo == b'\\' {
            i += 1;
            lo = *p.get(i)?;
        }
        i += 1;
        let mut hi = lo;
        if p.get(i) == Some(&b'-') && p.get(i + 1).is_some_and(|&b| b != b']') {
            hi = *p.get(i + 1)?;
            i += 2;
            if hi == b'\\' {
                hi = *p.get(i)?;
                i += 1;
            }
        }
        if lo <= c && c <= hi {
            matched = true;
        }
    }
}

/// Matches one path component `name` against `pattern` (POSIX `fnmatch` without
/// flags, byte-wise).
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    let (p, s) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut si) = (0usize, 0usize);
    // Where to resume after the last `*`: the pattern index after it and the name
    // index it has consumed up to.
    let mut star: Option<(usize, usize)> = None;
    loop {
        let step = match (p.get(pi), s.get(si)) {
            (Some(b'*'), _) => {
                star = Some((pi + 1, si));
                pi += 1;
                continue;
            }
            (None, None) => return true,
            (Some(b'?'), Some(_)) => Some(pi + 1),
            (Some(b'['), Some(&c)) => match match_class(p, pi + 1, c) {
                Some((true, next)) => Some(next),
                Some((false, _)) => None,
                None => (c == b'[').then_some(pi + 1),
            },
            (Some(b'\\'), Some(&c)) => match p.get(pi + 1) {
                Some(&e) => (e == c).then_some(pi + 2),
                None => (c == b'\\').then_some(pi + 1),
            },
            (Some(&pc), Some(&c)) => (pc == c).then_some(pi + 1),
            (Some(_), None) | (None, Some(_)) => None,
        };
        match step {
            Some(next) => {
                pi = next;
                si += 1;
            }
            None => match star {
                Some((sp, ss)) if ss < s.len() => {
                    star = Some((sp, ss + 1));
                    pi = sp;
                    si = ss + 1;
                }
                _ => return false,
            },
        }
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// The sorted names in `dir` ("" is the current directory) that match `pattern`.
fn matching_children(dir: &str, pattern: &str) -> Vec<String> {
    let Ok(entries) = fs::read_dir(if dir.is_empty() { "." } else { dir }) else {
        return vec![];
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| fnmatch(pattern, n))
        .collect();
    names.sort();
    names
}

/// The paths matching `pattern`; see the module docs.
pub fn matching_paths(pattern: &str) -> Vec<String> {
    if pattern.is_empty() {
        return vec![];
    }
    if !has_wildcard(pattern) {
        return if Path::new(pattern).exists() {
            vec![pattern.to_owned()]
        } else {
            vec![]
        };
    }
    let absolute = pattern.starts_with('/');
    let parts: Vec<&str> = pattern.split('/').collect();
    let last = parts.len() - 1;
    let mut paths = vec![if absolute {
        "/".to_owned()
    } else {
        String::new()
    }];
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() && i != last {
            continue;
        }
        let is_last = i == last;
        let mut next = Vec::new();
        for dir in &paths {
            let candidates = if has_wildcard(part) {
                matching_children(dir, part)
                    .into_iter()
                    .map(|n| join(dir, &n))
                    .collect()
            } else {
                vec![join(dir, part)]
            };
            for c in candidates {
                let p = Path::new(&c);
                if (is_last && p.exists()) || (!is_last && p.is_dir()) {
                    next.push(c);
                }
            }
        }
        paths = next;
        if paths.is_empty() {
            break;
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnmatch_wildcards_and_classes() {
        assert!(fnmatch("*.csv", "a.csv"));
        assert!(fnmatch("*.csv", ".hidden.csv"));
        assert!(!fnmatch("*.csv", "a.csvx"));
        assert!(fnmatch("a?c", "abc"));
        assert!(!fnmatch("a?c", "ac"));
        assert!(fnmatch("part-[0-9][0-9]", "part-07"));
        assert!(!fnmatch("part-[0-9]", "part-x"));
        assert!(fnmatch("[!a]*", "bcd"));
        assert!(!fnmatch("[^a]*", "abc"));
        assert!(fnmatch("[]x]", "]"));
        assert!(fnmatch("a[", "a["), "an unclosed class is literal");
        assert!(fnmatch("\\*", "*"));
        assert!(!fnmatch("\\*", "a"));
        assert!(fnmatch("*a*b*", "xxaxxbxx"));
        assert!(!fnmatch("*a*b", "xxaxxbxc"));
        assert!(fnmatch("*", ""));
        assert!(!fnmatch("?", ""));
    }

    #[test]
    fn globs_directories_level_by_level() {
        let tmp = tempfile::Builder::new()
            .prefix("af_glob_")
            .tempdir()
            .unwrap();
        let dir = tmp.path();
        let d = dir.to_str().unwrap().to_owned();
        for sub in ["x1", "x2", "y"] {
            fs::create_dir_all(dir.join(sub)).unwrap();
            fs::write(dir.join(sub).join("f.txt"), "").unwrap();
        }
        fs::write(dir.join("b.txt"), "").unwrap();
        fs::write(dir.join("a.txt"), "").unwrap();
        assert_eq!(
            matching_paths(&format!("{d}/*.txt")),
            [format!("{d}/a.txt"), format!("{d}/b.txt")]
        );
        assert_eq!(
            matching_paths(&format!("{d}/x*/f.txt")),
            [format!("{d}/x1/f.txt"), format!("{d}/x2/f.txt")]
        );
        assert_eq!(
            matching_paths(&format!("{d}/?/*")),
            [format!("{d}/y/f.txt")]
        );
        assert_eq!(
            matching_paths(&format!("{d}/a.txt")),
            [format!("{d}/a.txt")]
        );
        assert!(matching_paths(&format!("{d}/nope*")).is_empty());
        assert!(matching_paths(&format!("{d}/missing/*")).is_empty());
        assert!(matching_paths("").is_empty());
    }
}
