//! promptfoo's `javascript` asserts, as `expr` expressions (docs/guide/scorers.md, "Inline
//! checks"): the common one-line checks (`output.includes('x')`, `output.length < 100`,
//! `JSON.parse(output).a === 1`, `output.toLowerCase().startsWith(…)`, `/re/.test(output)`,
//! with `&&`, `||` and `!`) become an expression that passes exactly when promptfoo's would.
//! Anything else, or anything whose JavaScript meaning the expression could not keep (a
//! coercion, a regex feature the `regex` crate lacks), gives `None`: the caller runs it as
//! JavaScript instead.
//!
//! Where JavaScript would throw (`JSON.parse` of an answer that is not JSON, a field of
//! `null`), promptfoo fails the assert; the expression starts with a guard that is false
//! exactly then, so it fails too.

/// The `expr` expression that passes exactly when the JavaScript assert `source` does, or
/// `None` when it cannot be written faithfully. `source` is an expression over `output` and
/// `context.vars`, optionally `return …;`.
pub fn to_expr(source: &str) -> Option<String> {
    let mut s = source.trim();
    if let Some(rest) = s
        .strip_prefix("return ")
        .or_else(|| s.strip_prefix("return\n"))
    {
        s = rest.trim();
    }
    let s = s.strip_suffix(';').unwrap_or(s).trim();
    let tokens = tokenize(s)?;
    let mut p = Parser { tokens, at: 0 };
    let ast = p.or()?;
    if p.at != p.tokens.len() {
        return None;
    }
    let t = emit(&ast)?;
    if t.kind != Kind::Bool {
        return None;
    }
    Some(match t.guard {
        Some(g) => format!("{g} and {}", t.text),
        None => t.text,
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Num(f64),
    Str(String),
    Regex(String, String),
    Punct(&'static str),
}

/// Operators longest first, so `===` is not read as `==` then `=`.
const PUNCT: [&str; 20] = [
    "===", "!==", "&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "(", ")", "[", "]", ".", ",",
    "-", "=", "?",
];

fn tokenize(s: &str) -> Option<Vec<Token>> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' || c == '$' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '$')
            {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            out.push(Token::Num(text.parse().ok()?));
        } else if c == '\'' || c == '"' {
            let (text, end) = string_literal(&chars, i)?;
            out.push(Token::Str(text));
            i = end;
        } else if c == '/' && operand_expected(&out) {
            let (pattern, flags, end) = regex_literal(&chars, i)?;
            out.push(Token::Regex(pattern, flags));
            i = end;
        } else {
            let rest: String = chars[i..chars.len().min(i + 3)].iter().collect();
            let p = PUNCT.iter().find(|p| rest.starts_with(**p))?;
            if matches!(*p, "=" | "?") {
                return None; // assignment, a ternary, `?.`: not translated
            }
            out.push(Token::Punct(p));
            i += p.chars().count();
        }
    }
    Some(out)
}

/// Whether a `/` here starts a regex literal (no operand before it) rather than dividing.
fn operand_expected(before: &[Token]) -> bool {
    !matches!(
        before.last(),
        Some(
            Token::Ident(_)
                | Token::Num(_)
                | Token::Str(_)
                | Token::Regex(..)
                | Token::Punct(")" | "]")
        )
    )
}

/// A quoted string from `chars[at]`, its escapes undone; and the index after it.
fn string_literal(chars: &[char], at: usize) -> Option<(String, usize)> {
    let quote = chars[at];
    let mut out = String::new();
    let mut i = at + 1;
    loop {
        let c = *chars.get(i)?;
        i += 1;
        match c {
            _ if c == quote => return Some((out, i)),
            '\n' => return None,
            '\\' => {
                let e = *chars.get(i)?;
                i += 1;
                out.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '\\' | '\'' | '"' => e,
                    _ => return None,
                });
            }
            _ => out.push(c),
        }
    }
}

/// A regex literal from `chars[at]` (`/…/flags`): its source, its flags, the index after.
fn regex_literal(chars: &[char], at: usize) -> Option<(String, String, usize)> {
    let mut i = at + 1;
    let mut source = String::new();
    let mut in_class = false;
    loop {
        let c = *chars.get(i)?;
        i += 1;
        match c {
            '\\' => {
                source.push(c);
                source.push(*chars.get(i)?);
                i += 1;
            }
            '[' => {
                in_class = true;
                source.push(c);
            }
            ']' => {
                in_class = false;
                source.push(c);
            }
            '/' if !in_class => break,
            '\n' => return None,
            _ => source.push(c),
        }
    }
    let start = i;
    while i < chars.len() && chars[i].is_ascii_alphabetic() {
        i += 1;
    }
    Some((source, chars[start..i].iter().collect(), i))
}

/// A JavaScript expression, as far as it is translated.
#[derive(Debug, Clone, PartialEq)]
enum Js {
    Output,
    Var(String),
    /// `JSON.parse(output)`.
    Parsed,
    Str(String),
    Num(f64),
    Bool(bool),
    Null,
    Undefined,
    Regex(String, String),
    Field(Box<Js>, Field),
    Call(Box<Js>, String, Vec<Js>),
    Not(Box<Js>),
    Binary(&'static str, Box<Js>, Box<Js>),
}

#[derive(Debug, Clone, PartialEq)]
enum Field {
    Key(String),
    Index(usize),
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, p: &str) -> bool {
        if self.peek()
            == Some(&Token::Punct(
                PUNCT.iter().find(|q| **q == p).copied().unwrap_or(""),
            ))
        {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn binary(&mut self, ops: &[&'static str], next: fn(&mut Parser) -> Option<Js>) -> Option<Js> {
        let mut left = next(self)?;
        loop {
            let Some(op) = ops.iter().find(|op| self.eat(op)).copied() else {
                return Some(left);
            };
            left = Js::Binary(op, Box::new(left), Box::new(next(self)?));
        }
    }

    fn or(&mut self) -> Option<Js> {
        self.binary(&["||"], Parser::and)
    }

    fn and(&mut self) -> Option<Js> {
        self.binary(&["&&"], Parser::equality)
    }

    fn equality(&mut self) -> Option<Js> {
        self.binary(&["===", "!==", "==", "!="], Parser::relation)
    }

    fn relation(&mut self) -> Option<Js> {
        self.binary(&["<=", ">=", "<", ">"], Parser::unary)
    }

    fn unary(&mut self) -> Option<Js> {
        if self.eat("!") {
            return Some(Js::Not(Box::new(self.unary()?)));
        }
        if self.eat("-") {
            return match self.unary()? {
                Js::Num(n) => Some(Js::Num(-n)),
                _ => None,
            };
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Option<Js> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".") {
                let Some(Token::Ident(name)) = self.peek().cloned() else {
                    return None;
                };
                self.at += 1;
                if self.eat("(") {
                    let args = self.arguments()?;
                    e = Js::Call(Box::new(e), name, args);
                } else {
                    e = Js::Field(Box::new(e), Field::Key(name));
                }
            } else if self.eat("[") {
                let field = match self.peek().cloned()? {
                    Token::Str(s) => Field::Key(s),
                    Token::Num(n) if n.fract() == 0.0 && n >= 0.0 => Field::Index(n as usize),
                    _ => return None,
                };
                self.at += 1;
                if !self.eat("]") {
                    return None;
                }
                e = Js::Field(Box::new(e), field);
            } else {
                return Some(e);
            }
        }
    }

    fn arguments(&mut self) -> Option<Vec<Js>> {
        let mut args = Vec::new();
        if self.eat(")") {
            return Some(args);
        }
        loop {
            args.push(self.or()?);
            if self.eat(")") {
                return Some(args);
            }
            if !self.eat(",") {
                return None;
            }
        }
    }

    fn primary(&mut self) -> Option<Js> {
        let t = self.peek().cloned()?;
        self.at += 1;
        Some(match t {
            Token::Num(n) => Js::Num(n),
            Token::Str(s) => Js::Str(s),
            Token::Regex(p, f) => Js::Regex(p, f),
            Token::Punct("(") => {
                let e = self.or()?;
                if !self.eat(")") {
                    return None;
                }
                e
            }
            Token::Ident(name) => match name.as_str() {
                "output" => Js::Output,
                "true" | "false" => Js::Bool(name == "true"),
                "null" => Js::Null,
                "undefined" => Js::Undefined,
                "context" => {
                    let ok = self.eat(".") && self.peek() == Some(&Token::Ident("vars".into()));
                    self.at += 1;
                    if !ok || !self.eat(".") {
                        return None;
                    }
                    let Some(Token::Ident(var)) = self.peek().cloned() else {
                        return None;
                    };
                    self.at += 1;
                    Js::Var(var)
                }
                "JSON" => {
                    let parse = self.eat(".") && self.peek() == Some(&Token::Ident("parse".into()));
                    self.at += 1;
                    if !(parse && self.eat("(") && self.primary()? == Js::Output && self.eat(")")) {
                        return None;
                    }
                    Js::Parsed
                }
                _ => return None,
            },
            Token::Punct(_) => return None,
        })
    }
}

/// What a translated expression is known to be, as far as JavaScript's meaning depends on
/// it: a string, a number, a boolean, or a value read from JSON or the variables (any type).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Str,
    Num,
    Bool,
    Any,
    /// `.length` of a value read from JSON or the variables: a string's or a list's length,
    /// else an object's `length` field (or undefined).
    Length,
    Null,
    Undefined,
}

/// A translated expression: its text, its kind, and the condition under which JavaScript
/// would not throw evaluating it (`None`: it never throws).
#[derive(Debug, Clone)]
struct Out {
    text: String,
    kind: Kind,
    guard: Option<String>,
}

fn out(text: String, kind: Kind, guard: Option<String>) -> Option<Out> {
    Some(Out { text, kind, guard })
}

/// Both guards, when there are.
fn both(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a} and {b}")),
        (a, b) => a.or(b),
    }
}

/// A string as the expression's literal.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

fn emit(js: &Js) -> Option<Out> {
    match js {
        Js::Output => out("output".into(), Kind::Str, None),
        Js::Var(v) => out(format!("vars.{v}"), Kind::Any, None),
        Js::Parsed => out(
            "(output|fromjson)".into(),
            Kind::Any,
            Some("(output|fromjson) is defined".into()),
        ),
        Js::Str(s) => out(quoted(s), Kind::Str, None),
        Js::Num(n) => out(number(*n), Kind::Num, None),
        Js::Bool(b) => out(b.to_string(), Kind::Bool, None),
        Js::Null => out("none".into(), Kind::Null, None),
        Js::Undefined => out("undefined".into(), Kind::Undefined, None),
        Js::Regex(..) => None,
        Js::Field(base, field) => emit_field(base, field),
        Js::Call(receiver, method, args) => emit_call(receiver, method, args),
        Js::Not(inner) => {
            let i = emit(inner)?;
            // JavaScript's truth of a value read from JSON ([] and {} are true) is not the
            // expression's: only a boolean, a string or a number is negated.
            if !matches!(i.kind, Kind::Bool | Kind::Str | Kind::Num) {
                return None;
            }
            out(format!("(not {})", i.text), Kind::Bool, i.guard)
        }
        Js::Binary(op, a, b) => emit_binary(op, a, b),
    }
}

/// `base.key`, `base[0]`; `.length` of a string.
fn emit_field(base: &Js, field: &Field) -> Option<Out> {
    let b = emit(base)?;
    let x = &b.text;
    match (b.kind, field) {
        (Kind::Str, Field::Key(k)) if k == "length" => {
            out(format!("({x}|length)"), Kind::Num, b.guard)
        }
        (Kind::Any | Kind::Length, _) => {
            // A field of null or undefined throws.
            let safe = format!("({x} is defined and {x} is not none)");
            let (text, kind) = match field {
                Field::Key(k) if k == "length" => (
                    format!(
                        "({x}|length if {x} is string or {x} is sequence else {x}[\"length\"])"
                    ),
                    Kind::Length,
                ),
                Field::Key(k) => (format!("{x}[{}]", quoted(k)), Kind::Any),
                Field::Index(i) => (format!("{x}[{i}]"), Kind::Any),
            };
            out(text, kind, both(b.guard, Some(safe)))
        }
        _ => None,
    }
}

/// A string's method, or a regex's `test`.
fn emit_call(receiver: &Js, method: &str, args: &[Js]) -> Option<Out> {
    if let Js::Regex(source, flags) = receiver {
        let [arg] = args else { return None };
        let a = emit(arg)?;
        if method != "test" || a.kind != Kind::Str {
            return None;
        }
        let pattern = regex_of(source, flags)?;
        return out(
            format!("({} is matches({}))", a.text, quoted(&pattern)),
            Kind::Bool,
            a.guard,
        );
    }
    let r = emit(receiver)?;
    // A string method of a value that may be no string throws unless it is one.
    let guard = match r.kind {
        Kind::Str => r.guard.clone(),
        Kind::Any | Kind::Length => both(r.guard.clone(), Some(format!("{} is string", r.text))),
        _ => return None,
    };
    let one_string = || -> Option<Out> {
        let [arg] = args else { return None };
        let a = emit(arg)?;
        match a.kind {
            Kind::Str => Some(a),
            _ => None,
        }
    };
    match method {
        "toLowerCase" | "toUpperCase" | "trim" if args.is_empty() => {
            let filter = match method {
                "toLowerCase" => "lower",
                "toUpperCase" => "upper",
                _ => "trim",
            };
            out(format!("({}|{filter})", r.text), Kind::Str, guard)
        }
        "includes" => {
            let a = one_string()?;
            out(
                format!("({} in {})", a.text, r.text),
                Kind::Bool,
                both(guard, a.guard),
            )
        }
        "startsWith" | "endsWith" => {
            let a = one_string()?;
            let test = if method == "startsWith" {
                "startingwith"
            } else {
                "endingwith"
            };
            out(
                format!("({} is {test}({}))", r.text, a.text),
                Kind::Bool,
                both(guard, a.guard),
            )
        }
        "match" => {
            let [Js::Regex(source, flags)] = args else {
                return None;
            };
            if flags.contains('g') {
                return None;
            }
            let pattern = regex_of(source, flags)?;
            // Only its truth is kept: a match (an array) or null.
            out(
                format!("({} is matches({}))", r.text, quoted(&pattern)),
                Kind::Bool,
                guard,
            )
        }
        _ => None,
    }
}

fn emit_binary(op: &str, a: &Js, b: &Js) -> Option<Out> {
    let (l, r) = (emit(a)?, emit(b)?);
    match op {
        "&&" | "||" => {
            // JavaScript gives an operand, not a boolean: only booleans are combined.
            if l.kind != Kind::Bool || r.kind != Kind::Bool {
                return None;
            }
            let word = if op == "&&" { "and" } else { "or" };
            // The right side is evaluated (and may throw) only when the left does not decide.
            let guard = match (&l.guard, &r.guard) {
                (None, None) => None,
                (gl, Some(gr)) => {
                    let undecided = if op == "&&" {
                        l.text.clone()
                    } else {
                        format!("(not {})", l.text)
                    };
                    Some(format!(
                        "{}((not {undecided}) or {gr})",
                        gl.as_ref().map(|g| format!("{g} and ")).unwrap_or_default()
                    ))
                }
                (Some(gl), None) => Some(gl.clone()),
            };
            out(format!("({} {word} {})", l.text, r.text), Kind::Bool, guard)
        }
        "===" | "!==" | "==" | "!=" => {
            let strict = op.len() == 3;
            let same = equal(strict, &l, &r).or_else(|| equal(strict, &r, &l))?;
            let text = if op.starts_with('!') {
                format!("(not {same})")
            } else {
                same
            };
            out(text, Kind::Bool, both(l.guard, r.guard))
        }
        _ => {
            let text = match (l.kind, r.kind) {
                (Kind::Num, Kind::Num) => format!("({} {op} {})", l.text, r.text),
                // A length is a number (or, of an object, its `length` field: compared when
                // it is a number).
                (Kind::Length, Kind::Num) => format!(
                    "({0} is number and {0} is not boolean and {0} {op} {1})",
                    l.text, r.text
                ),
                (Kind::Num, Kind::Length) => format!(
                    "({1} is number and {1} is not boolean and {0} {op} {1})",
                    l.text, r.text
                ),
                // Anything else coerces in JavaScript: not translated.
                _ => return None,
            };
            out(text, Kind::Bool, both(l.guard, r.guard))
        }
    }
}

/// `l === r` (strict) or `l == r`, where the expression can say it exactly.
fn equal(strict: bool, l: &Out, r: &Out) -> Option<String> {
    let (x, y) = (&l.text, &r.text);
    let any = matches!(l.kind, Kind::Any | Kind::Length);
    Some(match (l.kind, r.kind) {
        (_, Kind::Null | Kind::Undefined) if any && !strict => {
            format!("({x} is none or {x} is undefined)")
        }
        (_, Kind::Null) if any => format!("({x} is none)"),
        (_, Kind::Undefined) if any => format!("({x} is undefined)"),
        (_, Kind::Bool) if any && strict && matches!(y.as_str(), "true" | "false") => {
            format!("({x} is {y})")
        }
        // `true == 1` in the expression, never in JavaScript: a number is a number first.
        (_, Kind::Num) if any && strict => {
            format!("({x} is number and {x} is not boolean and {x} == {y})")
        }
        // A string equals only the same string, in both languages.
        (_, Kind::Str) if any && strict => format!("({x} == {y})"),
        (Kind::Str, Kind::Any | Kind::Length) if strict => format!("({x} == {y})"),
        (Kind::Str, Kind::Str) | (Kind::Num, Kind::Num) | (Kind::Bool, Kind::Bool) => {
            format!("({x} == {y})")
        }
        _ => return None,
    })
}

/// A JavaScript regex as the `regex` crate's, with JavaScript's meaning: `\d`, `\w`, `\s`
/// and `\b` as JavaScript reads them (ASCII digits and word characters, its own spaces), `.`
/// short of every line end; `None` for what has no exact counterpart (lookaround,
/// backreferences, named groups, the `y` flag) or does not compile.
fn regex_of(source: &str, flags: &str) -> Option<String> {
    const SPACE: &str = r"\t\n\x0B\x0C\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";
    let mut out = String::new();
    for f in flags.chars() {
        match f {
            'i' => out.push_str("(?i)"),
            'm' => out.push_str("(?m)"),
            'g' | 'u' | 's' => {}
            _ => return None,
        }
    }
    let dot_all = flags.contains('s');
    let chars: Vec<char> = source.chars().collect();
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '\\' => {
                let e = *chars.get(i)?;
                i += 1;
                let piece = match (e, in_class) {
                    ('d', false) => "[0-9]".to_string(),
                    ('d', true) => "0-9".to_string(),
                    ('D', false) => "[^0-9]".to_string(),
                    ('w', false) => "[0-9A-Za-z_]".to_string(),
                    ('w', true) => "0-9A-Za-z_".to_string(),
                    ('W', false) => "[^0-9A-Za-z_]".to_string(),
                    ('s', false) => format!("[{SPACE}]"),
                    ('s', true) => SPACE.to_string(),
                    ('S', false) => format!("[^{SPACE}]"),
                    ('b', false) => r"(?-u:\b)".to_string(),
                    ('B', false) => r"(?-u:\B)".to_string(),
                    ('n' | 't' | 'r' | 'f' | 'v', _) => format!("\\{e}"),
                    ('/', _) => "/".to_string(),
                    (e, _) if e.is_ascii_punctuation() => format!("\\{e}"),
                    _ => return None,
                };
                out.push_str(&piece);
            }
            '[' if !in_class => {
                if chars.get(i) == Some(&']') || chars[i..].starts_with(&['^', ']']) {
                    return None; // [] and [^]: JavaScript's own
                }
                in_class = true;
                out.push('[');
            }
            '[' => out.push_str("\\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '.' if !in_class && !dot_all => out.push_str(r"[^\n\r\x{2028}\x{2029}]"),
            '.' if !in_class => out.push_str("(?s:.)"),
            '(' if chars.get(i) == Some(&'?') => {
                if chars.get(i + 1) != Some(&':') {
                    return None; // lookaround, a named group
                }
                out.push('(');
            }
            _ => out.push(c),
        }
    }
    regex::Regex::new(&out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::to_expr;
    use crate::expr::Expr;

    #[test]
    fn the_common_checks_read_as_expressions() {
        for (js, expr) in [
            ("output.includes('refund')", "(\"refund\" in output)"),
            ("!output.includes(\"sorry\")", "(not (\"sorry\" in output))"),
            ("output.length < 100", "((output|length) < 100)"),
            (
                "output.toLowerCase().startsWith('yes')",
                "((output|lower) is startingwith(\"yes\"))",
            ),
            ("/^\\d+$/.test(output)", "(output is matches(\"^[0-9]+$\"))"),
            (
                "return output.trim() === context.vars.answer;",
                "((output|trim) == vars.answer)",
            ),
            (
                "JSON.parse(output).ok === true",
                "(output|fromjson) is defined and ((output|fromjson) is defined and (output|fromjson) is not none) and ((output|fromjson)[\"ok\"] is true)",
            ),
        ] {
            assert_eq!(to_expr(js).as_deref(), Some(expr), "{js}");
            Expr::new(expr).unwrap();
        }
    }

    #[test]
    fn what_cannot_be_said_exactly_is_not_translated() {
        for js in [
            "output.length > 10 ? true : false",
            "x = output",
            "output.indexOf('a') !== -1",
            "JSON.parse(output).score > 3",
            "JSON.parse(output).a == 1",
            "/(?=a)b/.test(output)",
            "/(a)\\1/.test(output)",
            "/a/y.test(output)",
            "output.includes('a') && output.length",
            "!JSON.parse(output).items",
            "myCheck(output)",
            "output.split(' ').length > 3",
            "output",
            "output > 'a'",
            "JSON.parse(context.vars.x).a === 1",
            "",
        ] {
            assert_eq!(to_expr(js), None, "{js}");
        }
    }

    /// promptfoo's verdict on each (assert, output), as Node.js gives it: the assert's
    /// body run with `output` and `context.vars`, a pass when it returns `true`, a fail
    /// when it returns anything else or throws.
    fn node_verdicts(cases: &[(&str, &str)], vars: &serde_json::Value) -> Vec<bool> {
        use std::io::Write;
        let script = r#"
const {cases, vars} = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const context = {vars};
console.log(JSON.stringify(cases.map(([src, output]) => {
  const body = /\breturn\b/.test(src) ? src : `return (${src});`;
  try { return new Function('output', 'context', body)(output, context) === true; }
  catch (e) { return false; }
})));
"#;
        let mut child = std::process::Command::new("node")
            .args(["-e", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("node (Node.js) runs the JavaScript side of this test");
        let input = serde_json::json!({"cases": cases, "vars": vars});
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    #[test]
    fn each_translation_passes_exactly_where_node_passes_the_javascript() {
        let asserts = [
            "output.includes('Paris')",
            "!output.includes('sorry') && output.length <= 40",
            "output.toLowerCase().includes('paris') || output.startsWith('{')",
            "output.trim().endsWith('.')",
            "output.toUpperCase() === 'PARIS'",
            "output.trim() === context.vars.city",
            "output.toLowerCase().includes(context.vars.city.toLowerCase())",
            "/^\\s*paris\\b/i.test(output)",
            "/\\d{2,}/.test(output)",
            "/[a-c]\\w+\\.$/.test(output)",
            "output.match(/é.t/)",
            "JSON.parse(output).city === 'Paris'",
            "JSON.parse(output).n === 3",
            "JSON.parse(output).n !== 3",
            "JSON.parse(output).ok === true",
            "JSON.parse(output).ok !== false",
            "JSON.parse(output).missing === undefined",
            "JSON.parse(output).missing == null",
            "JSON.parse(output).nested.deep === 1",
            "!(JSON.parse(output).nested.deep === 1)",
            "JSON.parse(output).items.length === 3",
            "JSON.parse(output).items.length >= 2",
            "JSON.parse(output).items[0] === 'a'",
            "JSON.parse(output)['city'] === 'Paris' && JSON.parse(output).n === 3",
            "output.length > 100 || JSON.parse(output).ok === true",
            "output.length < 5",
            "!output",
        ];
        let outputs = [
            "Paris",
            "  paris is the capital.",
            "Sorry, I cannot say. PARIS",
            "{\"city\": \"Paris\", \"n\": 3, \"ok\": true, \"items\": [\"a\", \"b\", \"c\"]}",
            "{\"city\": \"Lyon\", \"n\": \"3\", \"ok\": 1, \"items\": \"abc\", \"nested\": {\"deep\": 1}}",
            "{\"n\": true, \"ok\": false, \"missing\": null, \"items\": {\"length\": 3}, \"nested\": null}",
            "```json\n{\"city\": \"Paris\"}\n```",
            "null",
            "[1, 2]",
            "",
            "42 and 12 élan été",
            "abc def.",
        ];
        let vars = serde_json::json!({"city": "Paris"});
        let case = promptgauge_suite::Case {
            id: "c".into(),
            vars: promptgauge_suite::cases::Vars(vec![("city".into(), "Paris".into())]),
            expected: vec![],
            expected_json: None,
            messages: vec![],
            files: vec![],
            tool_script: vec![],
            grade: None,
            tags: vec![],
            group: None,
            location: promptgauge_suite::FilePos::file(std::path::Path::new("cases.jsonl")),
        };
        let pairs: Vec<(&str, &str)> = asserts
            .iter()
            .flat_map(|a| outputs.iter().map(move |o| (*a, *o)))
            .collect();
        let node = node_verdicts(&pairs, &vars);
        let mut passes = 0;
        for ((js, output), node_passes) in pairs.iter().zip(node) {
            let expr = to_expr(js).unwrap_or_else(|| panic!("`{js}` was not translated"));
            let ours = Expr::new(&expr)
                .unwrap_or_else(|e| panic!("`{js}` became `{expr}`, which does not compile: {e}"))
                .eval(&case, output);
            assert_eq!(
                ours,
                Ok(if node_passes { 1.0 } else { 0.0 }),
                "`{js}` as `{expr}` on {output:?}"
            );
            passes += usize::from(node_passes);
        }
        // Both verdicts occur often: the comparison is not all fails.
        assert!(
            passes > pairs.len() / 10 && passes < pairs.len() * 9 / 10,
            "{passes}"
        );
    }
}
