//! MongoDB regular expressions (`$regex`, `/…/flags` values) on `fancy-regex`.
//!
//! MongoDB 7.0 compiles patterns with PCRE2 in UTF mode (not UCP), with the options
//! `i` (caseless), `m` (multiline), `s` (dotall), `x` (extended) and the ignored `u`; any other
//! option is error 51108 ` invalid flag in regex options: <c>`; a pattern that does not compile
//! is error 51091 `Regular expression is invalid: <reason>` (src/mongo/util/pcre_util.cpp,
//! expression_leaf.cpp `RegexMatchExpression`).
//!
//! `fancy-regex` supplies PCRE's backtracking features (look-around, back-references, atomic
//! groups, possessive quantifiers) and hands the rest to the `regex` crate. [`Regex::new`]
//! first rewrites the PCRE spellings whose meaning differs there:
//! - `\d \D \w \W \s \S` are ASCII-only in PCRE without UCP: rewritten to POSIX classes;
//! - `$` (without `m`) also matches before a final `\n` in PCRE: rewritten to `\Z` (or to
//!   `\n?\z` when it ends the pattern or a branch, which keeps simple patterns on the fast
//!   engine);
//! - `\h \H \v \V \R` (PCRE whitespace classes; Oniguruma reads `\h` as a hex digit),
//!   `\Q…\E` quoting, octal `\0oo`, control `\cX`, escaped punctuation (`\<` is a literal in
//!   PCRE, a word boundary in Oniguruma), and a literal `[`, `&` or `~` inside a class.
//!
//! - `\b \B` use ASCII word characters in PCRE without UCP: rewritten to look-arounds on
//!   `[[:word:]]` (`fancy-regex` cannot switch Unicode mode inline);
//! - leading PCRE start-of-pattern verbs (`(*UCP)`, `(*UTF)`, `(*CRLF)`, `(*LIMIT_MATCH=n)`,
//!   …) are consumed; `(*UCP)` keeps `\d \w \s \b` Unicode-aware, the others change
//!   nothing observable here.
//!
//! Known differences: error texts are `fancy-regex`'s,
//! not PCRE's (the codes are MongoDB's); a match that exceeds the backtracking limit counts as
//! no match (PCRE2 would fail the query).
//!
//! Invariant: construction and matching never panic; a [`Regex`] is cheap to clone.

use std::fmt;
use std::sync::Arc;

use crate::error::{QueryError, Result};

/// MongoDB's limit on a pattern's length in bytes (PCRE2's `MAX_PATTERN_SIZE` setting as
/// MongoDB builds it; longer patterns are refused before compiling).
pub const MAX_PATTERN_LEN: usize = 32764;

/// Backtracking steps allowed per match attempt before giving up (no match).
const BACKTRACK_LIMIT: usize = 1_000_000;

/// A compiled MongoDB regular expression, with its original pattern and options.
#[derive(Clone)]
pub struct Regex {
    pattern: String,
    options: String,
    compiled: Arc<fancy_regex::Regex>,
}

impl fmt::Debug for Regex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/{}/{}", self.pattern, self.options)
    }
}

impl PartialEq for Regex {
    fn eq(&self, other: &Regex) -> bool {
        self.pattern == other.pattern && self.options == other.options
    }
}

/// Validated options of a regular expression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `i`: case-insensitive.
    pub caseless: bool,
    /// `m`: `^` and `$` match at line boundaries.
    pub multiline: bool,
    /// `s`: `.` matches `\n`.
    pub dotall: bool,
    /// `x`: whitespace and `#` comments in the pattern are ignored.
    pub extended: bool,
}

impl Options {
    /// Parses an options string as MongoDB's `flagsToOptions` does (`u` is accepted and
    /// ignored; anything else is error 51108).
    pub fn parse(flags: &str) -> Result<Options> {
        let mut o = Options::default();
        for c in flags.chars() {
            match c {
                'i' => o.caseless = true,
                'm' => o.multiline = true,
                's' => o.dotall = true,
                'x' => o.extended = true,
                'u' => {}
                other => {
                    return Err(QueryError::Location(
                        51108,
                        format!(" invalid flag in regex options: {other}"),
                    ));
                }
            }
        }
        Ok(o)
    }
}

impl Regex {
    /// Compiles `pattern` with MongoDB `options`.
    pub fn new(pattern: &str, options: &str) -> Result<Regex> {
        if pattern.len() > MAX_PATTERN_LEN {
            return Err(QueryError::BadValue(
                "Regular expression is too long".into(),
            ));
        }
        if pattern.contains('\0') {
            return Err(QueryError::BadValue(
                "Regular expression cannot contain an embedded null byte".into(),
            ));
        }
        if options.contains('\0') {
            return Err(QueryError::BadValue(
                "Regular expression options string cannot contain an embedded null byte".into(),
            ));
        }
        let opts = Options::parse(options)?;
        let (ucp, body) = start_verbs(pattern);
        let translated = translate(body, opts, ucp)?;
        let compiled = fancy_regex::RegexBuilder::new(&translated)
            .backtrack_limit(BACKTRACK_LIMIT)
            .build()
            .map_err(|e| invalid(&e.to_string()))?;
        Ok(Regex {
            pattern: pattern.to_string(),
            options: options.to_string(),
            compiled: Arc::new(compiled),
        })
    }

    /// The pattern as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The options as given.
    pub fn options(&self) -> &str {
        &self.options
    }

    /// Whether the pattern matches anywhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        self.compiled.is_match(text).unwrap_or(false)
    }

    /// The first match starting at or after byte `start` of `text`: the byte range of the
    /// whole match and of each capture group (`None` for a group that did not take part). A
    /// match that exceeds the backtracking limit counts as no match.
    pub fn captures_at(&self, text: &str, start: usize) -> Option<Captures> {
        let caps = self.compiled.captures_from_pos(text, start).ok()??;
        let whole = caps.get(0)?;
        let groups = (1..caps.len())
            .map(|i| caps.get(i).map(|m| (m.start(), m.end())))
            .collect();
        Some(Captures {
            whole: (whole.start(), whole.end()),
            groups,
        })
    }
}

/// A match found by [`Regex::captures_at`] (byte ranges into the searched text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Captures {
    /// The whole match.
    pub whole: (usize, usize),
    /// Each capture group, in order.
    pub groups: Vec<Option<(usize, usize)>>,
}

fn invalid(reason: &str) -> QueryError {
    QueryError::Location(51091, format!("Regular expression is invalid: {reason}"))
}

/// PCRE's `\b` without UCP: between an ASCII word character and anything else.
const ASCII_WORD_BOUNDARY: &str =
    r"(?:(?<=[[:word:]])(?![[:word:]])|(?<![[:word:]])(?=[[:word:]]))";
/// PCRE's `\B` without UCP.
const ASCII_NOT_WORD_BOUNDARY: &str =
    r"(?:(?<=[[:word:]])(?=[[:word:]])|(?<![[:word:]])(?![[:word:]]))";

/// PCRE `\h`: horizontal whitespace (as class items, without brackets).
const H_SPACE: &str = r"\t\x20\xA0\x{1680}\x{180E}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}";
/// PCRE `\v`: vertical whitespace (as class items, without brackets).
const V_SPACE: &str = r"\n\x0B\f\r\x{85}\x{2028}\x{2029}";

/// Consumes PCRE2's start-of-pattern verbs; returns whether `(*UCP)` was among them and
/// the rest of the pattern.
fn start_verbs(mut pattern: &str) -> (bool, &str) {
    const VERBS: &[&str] = &[
        "UCP",
        "UTF",
        "UTF8",
        "NO_AUTO_POSSESS",
        "NO_DOTSTAR_ANCHOR",
        "NO_JIT",
        "NO_START_OPT",
        "NOTEMPTY",
        "NOTEMPTY_ATSTART",
        "CR",
        "LF",
        "CRLF",
        "ANYCRLF",
        "ANY",
        "NUL",
        "BSR_ANYCRLF",
        "BSR_UNICODE",
    ];
    const SETTINGS: &[&str] = &[
        "LIMIT_MATCH=",
        "LIMIT_RECURSION=",
        "LIMIT_DEPTH=",
        "LIMIT_HEAP=",
    ];
    let mut ucp = false;
    while let Some(rest) = pattern.strip_prefix("(*") {
        let Some(end) = rest.find(')') else { break };
        let verb = rest.get(..end).unwrap_or_default();
        let known = VERBS.contains(&verb)
            || SETTINGS.iter().any(|s| {
                verb.strip_prefix(s)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            });
        if !known {
            break;
        }
        ucp |= verb == "UCP";
        pattern = rest.get(end + 1..).unwrap_or_default();
    }
    (ucp, pattern)
}

/// Rewrites a PCRE pattern into `fancy-regex` syntax with the options as inline flags
/// (`ucp`: `\d \w \s \b` keep their Unicode meaning).
fn translate(pattern: &str, opts: Options, ucp: bool) -> Result<String> {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut flags = String::new();
    if opts.caseless {
        flags.push('i');
    }
    if opts.multiline {
        flags.push('m');
    }
    if opts.dotall {
        flags.push('s');
    }
    if opts.extended {
        flags.push('x');
    }
    if !flags.is_empty() {
        out.push_str("(?");
        out.push_str(&flags);
        out.push(')');
    }
    // With `m` (given, or possibly switched on inline) `$` keeps its multiline meaning.
    let dollar_is_line_end = opts.multiline || has_inline_multiline(pattern);

    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    let mut in_class = false;
    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        if in_class {
            match c {
                '\\' if ucp && matches!(next, Some('d' | 'D' | 'w' | 'W' | 's' | 'S')) => {
                    out.push('\\');
                    out.extend(next);
                    i += 2;
                    continue;
                }
                '\\' => {
                    i = escape_in_class(&chars, i, &mut out)?;
                    continue;
                }
                ']' => {
                    in_class = false;
                    out.push(']');
                }
                '[' if next == Some(':') => {
                    // A POSIX class `[:name:]`: copy through its closing `:]`.
                    let end = find_posix_end(&chars, i + 2);
                    match end {
                        Some(e) => {
                            for ch in chars.get(i..=e).unwrap_or(&[]) {
                                out.push(*ch);
                            }
                            i = e + 1;
                            continue;
                        }
                        None => out.push_str(r"\["),
                    }
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                _ => out.push(c),
            }
            i += 1;
            continue;
        }
        match c {
            '\\' if ucp && matches!(next, Some('d' | 'D' | 'w' | 'W' | 's' | 'S' | 'b' | 'B')) => {
                out.push('\\');
                out.extend(next);
                i += 2;
                continue;
            }
            '\\' => {
                i = escape_outside(&chars, i, &mut out)?;
                continue;
            }
            '[' => {
                in_class = true;
                out.push('[');
                // A leading `^` negates; a `]` right after the opening (or after `^`) is a
                // literal member of the class.
                if next == Some('^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i + 1) == Some(&']') {
                    out.push_str(r"\]");
                    i += 1;
                }
            }
            '{' => {
                check_quantifier(&chars, i)?;
                out.push('{');
            }
            '$' if !dollar_is_line_end => {
                if matches!(next, None | Some('|') | Some(')')) {
                    out.push_str(r"(?:\n?\z)");
                } else {
                    out.push_str(r"\Z");
                }
            }
            _ => out.push(c),
        }
        i += 1;
    }
    if in_class {
        return Err(invalid("missing terminating ] for character class"));
    }
    Ok(out)
}

/// PCRE2's checks on a `{n}`, `{n,}`, `{n,m}` quantifier starting at `chars[i] == '{'`
/// (anything else is a literal `{`).
fn check_quantifier(chars: &[char], i: usize) -> Result<()> {
    let rest = chars.get(i + 1..).unwrap_or(&[]);
    let Some(close) = rest.iter().position(|&c| c == '}') else {
        return Ok(());
    };
    let body: String = rest.get(..close).unwrap_or(&[]).iter().collect();
    let (lo, hi) = match body.split_once(',') {
        Some((lo, hi)) => (lo, Some(hi)),
        None => (body.as_str(), None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(lo) || hi.is_some_and(|h| !h.is_empty() && !digits(h)) {
        return Ok(());
    }
    let num = |s: &str| s.parse::<u64>().unwrap_or(u64::MAX);
    let (lo, hi) = (num(lo), hi.filter(|h| !h.is_empty()).map(num));
    if lo > 65535 || hi.is_some_and(|h| h > 65535) {
        return Err(invalid("number too big in {} quantifier"));
    }
    if hi.is_some_and(|h| h < lo) {
        return Err(invalid("numbers out of order in {} quantifier"));
    }
    Ok(())
}

/// Whether an inline option group such as `(?m)` or `(?im:` appears in the pattern.
fn has_inline_multiline(pattern: &str) -> bool {
    let b = pattern.as_bytes();
    let mut i = 0;
    while i + 2 < b.len() {
        if b.get(i) == Some(&b'(') && b.get(i + 1) == Some(&b'?') {
            let mut j = i + 2;
            while let Some(&c) = b.get(j) {
                if c == b'm' {
                    return true;
                }
                if !(c.is_ascii_alphabetic() || c == b'-' || c == b'^') {
                    break;
                }
                j += 1;
            }
        }
        i += 1;
    }
    false
}

/// How many capturing groups the pattern opens (unescaped `(` outside classes that is not
/// `(?…`, plus named groups).
fn capture_groups(chars: &[char]) -> usize {
    let mut n = 0;
    let mut i = 0;
    let mut in_class = false;
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => i += 1,
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '(' if !in_class => {
                let next = chars.get(i + 1..i + 3).unwrap_or(&[]);
                match next {
                    ['?', '<'] => {
                        if !matches!(chars.get(i + 3), Some('=') | Some('!')) {
                            n += 1;
                        }
                    }
                    ['?', 'P'] | ['?', '\''] => n += 1,
                    ['?', _] => {}
                    _ => n += 1,
                }
            }
            _ => {}
        }
        i += 1;
    }
    n
}

/// The index of the `]` closing a POSIX class whose name starts at `from`.
fn find_posix_end(chars: &[char], from: usize) -> Option<usize> {
    let mut j = from;
    if chars.get(j) == Some(&'^') {
        j += 1;
    }
    while let Some(&c) = chars.get(j) {
        if c == ':' {
            return (chars.get(j + 1) == Some(&']')).then_some(j + 1);
        }
        if !c.is_ascii_alphabetic() {
            return None;
        }
        j += 1;
    }
    None
}

/// Pushes `c` as a literal that means the same inside or outside a class.
fn push_literal(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() || !c.is_ascii() {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:X}}}", u32::from(c)));
    }
}

/// Reads `\0`, `\0o`, `\0oo` (octal); returns the char and the index after it.
fn octal_escape(chars: &[char], digits_from: usize) -> (char, usize) {
    let mut value = 0u32;
    let mut j = digits_from;
    while j < digits_from + 2 {
        match chars.get(j).and_then(|c| c.to_digit(8)) {
            Some(d) => value = value * 8 + d,
            None => break,
        }
        j += 1;
    }
    (char::from_u32(value).unwrap_or('\0'), j)
}

/// Translates the escape at `chars[i] == '\\'` outside a class; returns the next index.
fn escape_outside(chars: &[char], i: usize, out: &mut String) -> Result<usize> {
    let Some(&e) = chars.get(i + 1) else {
        return Err(invalid(r"\ at end of pattern"));
    };
    match e {
        'd' => out.push_str("[[:digit:]]"),
        'D' => out.push_str("[[:^digit:]]"),
        'w' => out.push_str("[[:word:]]"),
        'W' => out.push_str("[[:^word:]]"),
        's' => out.push_str("[[:space:]]"),
        'S' => out.push_str("[[:^space:]]"),
        'h' => out.push_str(&format!("[{H_SPACE}]")),
        'H' => out.push_str(&format!("[^{H_SPACE}]")),
        'v' => out.push_str(&format!("[{V_SPACE}]")),
        'V' => out.push_str(&format!("[^{V_SPACE}]")),
        'R' => out.push_str(&format!(r"(?:\r\n|[{V_SPACE}])")),
        'b' => out.push_str(ASCII_WORD_BOUNDARY),
        'B' => out.push_str(ASCII_NOT_WORD_BOUNDARY),
        'Q' => return Ok(quoted(chars, i + 2, out)),
        'E' => {}
        'c' => {
            let Some(&x) = chars.get(i + 2) else {
                return Err(invalid(r"\c at end of pattern"));
            };
            let code = u32::from(x.to_ascii_uppercase()) ^ 0x40;
            push_literal(out, char::from_u32(code).unwrap_or('\0'));
            return Ok(i + 3);
        }
        '0' => {
            let (c, next) = octal_escape(chars, i + 2);
            push_literal(out, c);
            return Ok(next);
        }
        '1'..='9' => {
            // A back-reference when below 10 or when that many groups exist; else octal.
            let mut j = i + 1;
            let mut n = 0usize;
            while let Some(d) = chars.get(j).and_then(|c| c.to_digit(10)) {
                n = n.saturating_mul(10).saturating_add(d as usize);
                j += 1;
            }
            if n < 10 || n <= capture_groups(chars) {
                out.push('\\');
                for ch in chars.get(i + 1..j).unwrap_or(&[]) {
                    out.push(*ch);
                }
                return Ok(j);
            }
            let mut value = 0u32;
            let mut k = i + 1;
            while k < i + 4 {
                match chars.get(k).and_then(|c| c.to_digit(8)) {
                    Some(d) => value = value * 8 + d,
                    None => break,
                }
                k += 1;
            }
            if k == i + 1 {
                // `\8`, `\9`: the digit itself.
                push_literal(out, e);
                return Ok(i + 2);
            }
            push_literal(out, char::from_u32(value).unwrap_or('\0'));
            return Ok(k);
        }
        c if c.is_ascii_alphanumeric() => {
            // Everything else (\b \B \A \z \Z \n \t \x.. \p{..} \1 \k<..> …) is spelled the same.
            out.push('\\');
            out.push(c);
        }
        c => push_literal(out, c),
    }
    Ok(i + 2)
}

/// Translates the escape at `chars[i] == '\\'` inside a class; returns the next index.
fn escape_in_class(chars: &[char], i: usize, out: &mut String) -> Result<usize> {
    let Some(&e) = chars.get(i + 1) else {
        return Err(invalid(r"\ at end of pattern"));
    };
    match e {
        'd' => out.push_str("[:digit:]"),
        'D' => out.push_str("[:^digit:]"),
        'w' => out.push_str("[:word:]"),
        'W' => out.push_str("[:^word:]"),
        's' => out.push_str("[:space:]"),
        'S' => out.push_str("[:^space:]"),
        'h' => out.push_str(H_SPACE),
        'v' => out.push_str(V_SPACE),
        'b' => out.push_str(r"\x08"),
        'Q' => return Ok(quoted(chars, i + 2, out)),
        'E' => {}
        '0' => {
            let (c, next) = octal_escape(chars, i + 2);
            push_literal(out, c);
            return Ok(next);
        }
        c if c.is_ascii_alphanumeric() => {
            out.push('\\');
            out.push(c);
        }
        c => push_literal(out, c),
    }
    Ok(i + 2)
}

/// Copies `\Q…\E` content (starting at `from`) as literals; returns the index after `\E`.
fn quoted(chars: &[char], from: usize, out: &mut String) -> usize {
    let mut j = from;
    while let Some(&c) = chars.get(j) {
        if c == '\\' && chars.get(j + 1) == Some(&'E') {
            return j + 2;
        }
        push_literal(out, c);
        j += 1;
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, o: &str, s: &str) -> bool {
        Regex::new(p, o).unwrap().is_match(s)
    }

    #[test]
    fn options() {
        assert!(m("foo", "i", "FOO"));
        assert!(!m("^foo", "", "bar\nfoo"));
        assert!(m("^foo", "m", "bar\nfoo"));
        assert!(m("b.*foo", "s", "bar\nfoo"));
        assert!(!m("b.*foo", "", "bar\nfoo"));
        assert!(m("f o o # comment", "x", "foo"));
        assert!(m("foo", "u", "foo"));
        assert_eq!(
            Regex::new("a", "g").unwrap_err(),
            QueryError::Location(51108, " invalid flag in regex options: g".into())
        );
    }

    #[test]
    fn pcre_semantics() {
        assert!(m("foo$", "", "foo\n"));
        assert!(!m("foo$", "", "foo\nx"));
        assert!(m("foo$|bar", "", "foo\n"));
        assert!(m(r"o$\n", "", "foo\n"));
        assert!(!m(r"\d", "", "٣"));
        assert!(m(r"\d", "", "3"));
        assert!(!m(r"\w", "", "é"));
        assert!(m(r"[^\d]", "", "٣"));
        assert!(m(r"\h", "", "\t"));
        assert!(m(r"\Qa.b\E", "", "a.b"));
        assert!(!m(r"\Qa.b\E", "", "axb"));
        assert!(m(r"\<", "", "<"));
        assert!(m(r"[[]", "", "["));
        assert!(m(r"[]a]", "", "]"));
        assert!(m(r"[^]a]", "", "b"));
        assert!(m(r"[a&&b]", "", "&"));
        assert!(m(r"(?<=a)b", "", "ab"));
        assert!(m(r"(a)\1", "", "aa"));
        assert!(m(r"\x41", "", "A"));
        assert!(m(r"\101|\0", "", "\0"));
        assert!(m(r"\cA", "", "\x01"));
        assert!(m(r"[[:alpha:]]", "", "q"));
        assert!(m(r"a{", "", "a{"));
        // ASCII word boundaries unless (*UCP).
        assert!(m(r"\byster", "", "Blue Öyster Cult"));
        assert!(!m(r"\byster", "", "Blue Oyster Cult"));
        assert!(!m(r"(*UCP)\byster", "", "Blue Öyster Cult"));
        assert!(m(r"(*UCP)\bÖyster", "", "Blue Öyster Cult"));
        assert!(m(r"(*UCP)\w", "", "é"));
        assert!(m(r"(*UCP)(*CRLF)[\d]", "", "٣"));
        assert!(!m(r"(*UCP)/\byster/", "", "Blue Öyster Cult"));
        assert!(m(r"a\B", "", "ab"));
        // Unknown verbs are left to the compiler (an error, as in PCRE2).
        assert!(Regex::new("(*BOGUS)a", "").is_err());
    }

    #[test]
    fn errors() {
        for p in ["(", "*", "[b-a]", r"\", "[a", "a{2,1}", "a{70000}"] {
            match Regex::new(p, "") {
                Err(QueryError::Location(51091, msg)) => {
                    assert!(msg.starts_with("Regular expression is invalid: "), "{msg}")
                }
                other => panic!("{p}: {other:?}"),
            }
        }
        assert!(matches!(
            Regex::new("a\0", ""),
            Err(QueryError::BadValue(_))
        ));
    }
}
