//! A program given as one string, run without a shell.
//!
//! ```text
//!   "PYTHONMALLOC=malloc python3 -c 'print(1)' < in.txt"
//!      words, as a shell splits them ('...', "...", \x)
//!      ├─ NAME=VALUE before the program ──▶ env
//!      ├─ the rest ───────────────────────▶ argv (Command::new(argv[0]).args(..))
//!      └─ a final `< FILE` ───────────────▶ stdin
//!   anything else a shell would interpret (| ; & > $ ` * ? [ ( ) leading # ~) is refused
//! ```
//!
//! No byte of the string ever reaches a shell: what is not understood is an
//! error that says so, never passed on.

use anyhow::{anyhow, bail, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// A program given as one string (`--run-test "PYTHONMALLOC=malloc python3
/// x.py < in.txt"`), split into words the way a shell would split them but
/// never handed to a shell: quotes ('...', "...") and backslashes work;
/// NAME=VALUE words before the program set its environment; a final
/// `< FILE` connects its standard input. Anything else a shell would
/// interpret (pipes, `;`, `&`, `>`, `$`, backquotes, globs) is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// The string as given (for messages and reports).
    pub text: String,
    pub env: Vec<(String, String)>,
    pub argv: Vec<String>,
    pub stdin: Option<std::path::PathBuf>,
}

impl CommandLine {
    pub fn parse(text: &str) -> Result<CommandLine> {
        // (word, where its first quoted or escaped character is)
        let mut words: Vec<(String, Option<usize>)> = Vec::new();
        let mut cur: Option<(String, Option<usize>)> = None;
        let mut it = text.chars().peekable();
        let refuse = |c: char| -> anyhow::Error {
            anyhow!(
                "{text:?}: `{c}` needs a shell, and heaplab runs the program without one: give \
                 the program and its arguments (quotes, NAME=VALUE before the program and a \
                 final `< FILE` are understood)"
            )
        };
        while let Some(c) = it.next() {
            match c {
                ' ' | '\t' | '\n' => {
                    if let Some(w) = cur.take() {
                        words.push(w);
                    }
                }
                '\'' => {
                    let w = cur.get_or_insert((String::new(), None));
                    w.1 = w.1.or(Some(w.0.len()));
                    loop {
                        match it.next() {
                            Some('\'') => break,
                            Some(ch) => w.0.push(ch),
                            None => bail!("{text:?}: a ' is not closed"),
                        }
                    }
                }
                '"' => {
                    let w = cur.get_or_insert((String::new(), None));
                    w.1 = w.1.or(Some(w.0.len()));
                    loop {
                        match it.next() {
                            Some('"') => break,
                            Some('\\') => match it.next() {
                                Some(ch @ ('"' | '\\' | '$' | '`')) => w.0.push(ch),
                                Some('\n') => {}
                                Some(ch) => {
                                    w.0.push('\\');
                                    w.0.push(ch);
                                }
                                None => bail!("{text:?}: a \" is not closed"),
                            },
                            Some(ch @ ('$' | '`')) => return Err(refuse(ch)),
                            Some(ch) => w.0.push(ch),
                            None => bail!("{text:?}: a \" is not closed"),
                        }
                    }
                }
                '\\' => match it.next() {
                    Some('\n') => {}
                    Some(ch) => {
                        let w = cur.get_or_insert((String::new(), None));
                        w.1 = w.1.or(Some(w.0.len()));
                        w.0.push(ch);
                    }
                    None => bail!("{text:?}: a \\ ends the line"),
                },
                '<' => {
                    if let Some(w) = cur.take() {
                        words.push(w);
                    }
                    words.push(("<".into(), None));
                }
                '|' | '&' | ';' | '>' | '(' | ')' | '$' | '`' | '*' | '?' | '[' => {
                    return Err(refuse(c))
                }
                '#' | '~' if cur.is_none() => return Err(refuse(c)),
                ch => cur.get_or_insert((String::new(), None)).0.push(ch),
            }
        }
        if let Some(w) = cur.take() {
            words.push(w);
        }
        let mut stdin = None;
        if let Some(k) = words.iter().position(|(w, q)| w == "<" && q.is_none()) {
            if k + 2 != words.len() {
                bail!("{text:?}: `<` takes one file, at the end of the command");
            }
            stdin = Some(std::path::PathBuf::from(&words[k + 1].0));
            words.truncate(k);
        }
        let mut env = Vec::new();
        let mut rest = words.into_iter().peekable();
        while let Some((w, quoted_at)) = rest.peek() {
            let Some((k, v)) = w.split_once('=') else { break };
            if quoted_at.is_some_and(|q| q <= k.len())
                || k.is_empty()
                || k.starts_with(|c: char| c.is_ascii_digit())
                || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                break;
            }
            env.push((k.to_string(), v.to_string()));
            rest.next();
        }
        let argv: Vec<String> = rest.map(|(w, _)| w).collect();
        if argv.is_empty() {
            bail!("{text:?}: no program to run");
        }
        Ok(CommandLine { text: text.to_string(), env, argv, stdin })
    }

    /// The command: program, arguments and environment (stdin is the caller's).
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..]).envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// The standard input to give it: the `< FILE`, else nothing (/dev/null).
    pub fn stdin(&self, cwd: &Path) -> Result<Stdio> {
        Ok(match &self.stdin {
            Some(f) => {
                let p = cwd.join(f);
                Stdio::from(
                    std::fs::File::open(&p)
                        .map_err(|e| anyhow!(e).context(format!("opening {}", p.display())))?,
                )
            }
            None => Stdio::null(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_like_a_shell_without_one() {
        let c = CommandLine::parse(
            "PYTHONMALLOC=malloc A_1='x y' python3 -c 'print(\"hi\")' \"a b\" c\\ d < in.txt",
        )
        .unwrap();
        assert_eq!(c.env, [("PYTHONMALLOC".into(), "malloc".into()), ("A_1".into(), "x y".into())]);
        assert_eq!(c.argv, ["python3", "-c", "print(\"hi\")", "a b", "c d"]);
        assert_eq!(c.stdin.as_deref(), Some(Path::new("in.txt")));
        // what heaplab workloads prints, quoted with '\''
        let c = CommandLine::parse("perl -e 'print q{it'\\''s}' x=1").unwrap();
        assert_eq!(c.argv, ["perl", "-e", "print q{it's}", "x=1"]);
        assert!(c.env.is_empty());
        for bad in
            ["a | b", "a; touch x", "a && b", "a > f", "echo $HOME", "a `b`", "ls *", "a < f g"]
        {
            assert!(CommandLine::parse(bad).is_err(), "{bad} was accepted");
        }
        let e = CommandLine::parse("t;touch INJECTED;x").unwrap_err().to_string();
        assert!(e.contains("needs a shell"), "{e}");
        assert!(CommandLine::parse("  ").is_err());
        assert!(CommandLine::parse("'open").is_err());
    }
}
