//! Splits a formula into tokens, each with the line and column where it starts.

use super::{ErrorKind, FormulaError, Position};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    Number(f64),
    Ident(String),
    True,
    False,
    Nil,
    /// `&&` or `and`.
    And,
    /// `||` or `or`.
    Or,
    /// `!` or `not`.
    Not,
    In,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    /// `**` or `^`.
    Pow,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    Question,
    QuestionQuestion,
    Colon,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Hash,
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub(crate) fn describe(&self) -> String {
        let s = match self {
            Tok::Number(n) => return format!("number {n}"),
            Tok::Ident(name) => return format!("name `{name}`"),
            Tok::True => "`true`",
            Tok::False => "`false`",
            Tok::Nil => "`nil`",
            Tok::And => "`&&`",
            Tok::Or => "`||`",
            Tok::Not => "`!`",
            Tok::In => "`in`",
            Tok::Plus => "`+`",
            Tok::Minus => "`-`",
            Tok::Star => "`*`",
            Tok::Slash => "`/`",
            Tok::Percent => "`%`",
            Tok::Pow => "`**`",
            Tok::EqEq => "`==`",
            Tok::NotEq => "`!=`",
            Tok::Lt => "`<`",
            Tok::Le => "`<=`",
            Tok::Gt => "`>`",
            Tok::Ge => "`>=`",
            Tok::Question => "`?`",
            Tok::QuestionQuestion => "`??`",
            Tok::Colon => "`:`",
            Tok::LParen => "`(`",
            Tok::RParen => "`)`",
            Tok::LBracket => "`[`",
            Tok::RBracket => "`]`",
            Tok::LBrace => "`{`",
            Tok::RBrace => "`}`",
            Tok::Comma => "`,`",
            Tok::Hash => "`#`",
            Tok::Eof => "the end of the formula",
        };
        s.to_string()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token {
    pub(crate) tok: Tok,
    pub(crate) pos: Position,
}

struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: u32,
    column: u32,
}

impl Lexer<'_> {
    fn pos(&self) -> Position {
        Position {
            line: self.line,
            column: self.column,
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.chars.peek().copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next()?;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn eat(&mut self, expected: char) -> bool {
        if self.peek() == Some(expected) {
            self.bump();
            true
        } else {
            false
        }
    }

    /// Skips white space and `//` / `/* */` comments (expr allows both).
    fn skip_trivia(&mut self, source: &str) -> Result<(), FormulaError> {
        loop {
            match self.peek() {
                Some(c) if c.is_whitespace() => {
                    self.bump();
                }
                Some('/') => {
                    let mut ahead = self.chars.clone();
                    ahead.next();
                    match ahead.next() {
                        Some('/') => {
                            while self.peek().is_some_and(|c| c != '\n') {
                                self.bump();
                            }
                        }
                        Some('*') => {
                            let start = self.pos();
                            self.bump();
                            self.bump();
                            loop {
                                match self.bump() {
                                    None => {
                                        return Err(FormulaError::at(
                                            ErrorKind::Syntax("unclosed comment `/*`".into()),
                                            start,
                                            source,
                                        ));
                                    }
                                    Some('*') if self.eat('/') => break,
                                    Some(_) => {}
                                }
                            }
                        }
                        _ => return Ok(()),
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn number(&mut self, first: char, pos: Position, source: &str) -> Result<Tok, FormulaError> {
        let bad = |what: String| FormulaError::at(ErrorKind::Syntax(what), pos, source);
        if first == '0' && matches!(self.peek(), Some('x' | 'X')) {
            self.bump();
            let mut digits = String::new();
            while let Some(c) = self.peek().filter(|c| c.is_ascii_hexdigit() || *c == '_') {
                self.bump();
                if c != '_' {
                    digits.push(c);
                }
            }
            return u64::from_str_radix(&digits, 16)
                .map(|n| Tok::Number(u64_to_f64(n)))
                .map_err(|_| bad(format!("invalid hexadecimal number `0x{digits}`")));
        }
        let mut text = String::new();
        text.push(first);
        let digits = |lx: &mut Self, text: &mut String| {
            while let Some(c) = lx.peek().filter(|c| c.is_ascii_digit() || *c == '_') {
                lx.bump();
                if c != '_' {
                    text.push(c);
                }
            }
        };
        digits(self, &mut text);
        // A fraction only when a digit follows the dot, so `1..3` is not read as `1.` `.3`.
        if first != '.' && self.peek() == Some('.') {
            let mut ahead = self.chars.clone();
            ahead.next();
            if ahead.next().is_some_and(|c| c.is_ascii_digit()) {
                self.bump();
                text.push('.');
                digits(self, &mut text);
            }
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            text.push('e');
            self.bump();
            if let Some(sign) = self.peek().filter(|c| *c == '+' || *c == '-') {
                self.bump();
                text.push(sign);
            }
            digits(self, &mut text);
        }
        text.parse::<f64>()
            .map(Tok::Number)
            .map_err(|_| bad(format!("invalid number `{text}`")))
    }
}

/// `n` rounded to the nearest f64 (precision is lost above 2^53, as in any f64 formula value):
/// both halves convert exactly, and the one addition rounds once.
fn u64_to_f64(n: u64) -> f64 {
    let high = u32::try_from(n >> 32).unwrap_or(u32::MAX);
    let low = u32::try_from(n & u64::from(u32::MAX)).unwrap_or(u32::MAX);
    f64::from(high) * 4_294_967_296.0 + f64::from(low)
}

/// Tokenizes `source`; the last token is always [`Tok::Eof`].
pub(crate) fn tokenize(source: &str) -> Result<Vec<Token>, FormulaError> {
    let mut lx = Lexer {
        chars: source.chars().peekable(),
        line: 1,
        column: 1,
    };
    let mut out = Vec::new();
    loop {
        lx.skip_trivia(source)?;
        let pos = lx.pos();
        let Some(c) = lx.bump() else {
            out.push(Token { tok: Tok::Eof, pos });
            return Ok(out);
        };
        let tok = match c {
            '0'..='9' => lx.number(c, pos, source)?,
            '.' if lx.peek().is_some_and(|c| c.is_ascii_digit()) => lx.number(c, pos, source)?,
            c if c.is_alphabetic() || c == '_' || c == '$' => {
                let mut name = String::from(c);
                while let Some(c) = lx.peek().filter(|c| c.is_alphanumeric() || *c == '_') {
                    lx.bump();
                    name.push(c);
                }
                match name.as_str() {
                    "true" => Tok::True,
                    "false" => Tok::False,
                    "nil" => Tok::Nil,
                    "and" => Tok::And,
                    "or" => Tok::Or,
                    "not" => Tok::Not,
                    "in" => Tok::In,
                    _ => Tok::Ident(name),
                }
            }
            '+' => Tok::Plus,
            '-' => Tok::Minus,
            '*' if lx.eat('*') => Tok::Pow,
            '*' => Tok::Star,
            '/' => Tok::Slash,
            '%' => Tok::Percent,
            '^' => Tok::Pow,
            '=' if lx.eat('=') => Tok::EqEq,
            '!' if lx.eat('=') => Tok::NotEq,
            '!' => Tok::Not,
            '<' if lx.eat('=') => Tok::Le,
            '<' => Tok::Lt,
            '>' if lx.eat('=') => Tok::Ge,
            '>' => Tok::Gt,
            '&' if lx.eat('&') => Tok::And,
            '|' if lx.eat('|') => Tok::Or,
            '?' if lx.eat('?') => Tok::QuestionQuestion,
            '?' => Tok::Question,
            ':' => Tok::Colon,
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            '[' => Tok::LBracket,
            ']' => Tok::RBracket,
            '{' => Tok::LBrace,
            '}' => Tok::RBrace,
            ',' => Tok::Comma,
            '#' => Tok::Hash,
            '"' | '\'' | '`' => {
                return Err(FormulaError::at(
                    ErrorKind::Syntax(
                        "strings are not supported: a formula computes a number from trigger values"
                            .into(),
                    ),
                    pos,
                    source,
                ));
            }
            '=' => {
                return Err(FormulaError::at(
                    ErrorKind::Syntax("unexpected `=`; compare with `==`".into()),
                    pos,
                    source,
                ));
            }
            other => {
                return Err(FormulaError::at(
                    ErrorKind::Syntax(format!("unexpected character `{other}`")),
                    pos,
                    source,
                ));
            }
        };
        out.push(Token { tok, pos });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s)
            .expect("tokenizes")
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    #[test]
    fn numbers_keywords_and_two_character_operators_are_single_tokens() {
        assert_eq!(
            toks("1_000 .5 2e3 0x1F a and not b ** c ^ d ?? e != f // rest"),
            vec![
                Tok::Number(1000.0),
                Tok::Number(0.5),
                Tok::Number(2000.0),
                Tok::Number(31.0),
                Tok::Ident("a".into()),
                Tok::And,
                Tok::Not,
                Tok::Ident("b".into()),
                Tok::Pow,
                Tok::Ident("c".into()),
                Tok::Pow,
                Tok::Ident("d".into()),
                Tok::QuestionQuestion,
                Tok::Ident("e".into()),
                Tok::NotEq,
                Tok::Ident("f".into()),
                Tok::Eof,
            ]
        );
    }

    #[test]
    fn positions_count_lines_and_columns_from_one() {
        let t = tokenize("a +\n  /* c */ b").expect("tokenizes");
        let at: Vec<(u32, u32)> = t.iter().map(|t| (t.pos.line, t.pos.column)).collect();
        assert_eq!(at, vec![(1, 1), (1, 3), (2, 11), (2, 12)]);
    }

    #[test]
    fn hexadecimal_numbers_round_to_the_nearest_float() {
        assert_eq!(
            toks("0xFFFFFFFFFFFFFFFF")[0],
            Tok::Number(18_446_744_073_709_551_615.0)
        );
        assert_eq!(toks("0x1_0000_0001")[0], Tok::Number(4_294_967_297.0));
        // 2^53 + 1 is not a float: it rounds to even, 2^53.
        assert_eq!(
            toks("0x20000000000001")[0],
            Tok::Number(9_007_199_254_740_992.0)
        );
        assert!(tokenize("0x1FFFFFFFFFFFFFFFF").is_err());
    }

    #[test]
    fn strings_and_single_equals_are_rejected_with_their_column() {
        let e = tokenize("a == 'x'").unwrap_err();
        assert_eq!(e.position, Some(Position { line: 1, column: 6 }));
        let e = tokenize("a = 1").unwrap_err();
        assert!(e.to_string().contains("compare with `==`"), "{e}");
    }
}
