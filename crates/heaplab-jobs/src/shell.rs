//! Words quoted for a POSIX shell, as GNU parallel and Slurm scripts run a
//! job's line: every word in single quotes unless it is plainly safe.

/// One word, quoted if needed.
pub fn quote(w: &str) -> String {
    let safe =
        !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=+,@%".contains(&b));
    if safe {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// Words joined into one line of shell.
pub fn join(words: &[String]) -> String {
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_what_a_shell_would_split_or_expand() {
        assert_eq!(quote("/a/b.hltrace"), "/a/b.hltrace");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("x\ny"), "'x\ny'");
    }

    #[test]
    fn a_shell_gives_back_the_words() {
        let words =
            vec!["printf".to_string(), "%s|".into(), "a b".into(), "it's".into(), "$X;`y`".into()];
        let out = std::process::Command::new("sh").arg("-c").arg(join(&words)).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a b|it's|$X;`y`|");
    }
}
