//! Merging trace documents that ranks of other processes wrote (each
//! daemon's `--trace FILE`, each PE's at `shmem_finalize`) into one. A
//! document is checked before its events are taken — pld's header, its
//! closing lines, every event a whole JSON object — so that a truncated
//! file (a rank killed while writing it) or another program's JSON is
//! refused by name, never merged into a document a viewer cannot read.

use super::Trace;
use std::fmt::Write as _;

/// The first line of every document pld writes.
pub(super) const HEAD: &str = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";

/// Why a document cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// It does not start as pld's traces do.
    #[error("{name} is not a trace pld wrote (it does not start with pld's trace header)")]
    NotPld {
        /// The document's name (its file).
        name: String,
    },
    /// It ends before its events do.
    #[error(
        "{name} is truncated: it ends inside its events, without the lines that close them (was its rank stopped while writing it?)"
    )]
    Truncated {
        /// The document's name.
        name: String,
    },
    /// An event is not one whole JSON object.
    #[error("{name}, line {line}: not one whole JSON object: {text}")]
    BadEvent {
        /// The document's name.
        name: String,
        /// The line, from 1.
        line: usize,
        /// Its start.
        text: String,
    },
}

/// Whether `s` is one whole JSON object: braces and brackets balanced
/// outside strings, every string closed, nothing after the object.
fn whole_object(s: &str) -> bool {
    let s = s.trim();
    if !s.starts_with('{') {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0i64, false, false);
    for (i, c) in s.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                c if (c as u32) < 0x20 => return false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
                if depth == 0 {
                    return s[i + c.len_utf8()..].trim().is_empty();
                }
            }
            _ => {}
        }
    }
    false
}

/// The events of document `text` (named `name` in errors), one per line,
/// and the events it says it dropped.
fn events<'a>(name: &str, text: &'a str) -> Result<(Vec<&'a str>, u64), MergeError> {
    let body = text.strip_prefix(HEAD).ok_or_else(|| MergeError::NotPld {
        name: name.to_string(),
    })?;
    let truncated = || MergeError::Truncated {
        name: name.to_string(),
    };
    let (events, tail) = body
        .rsplit_once("\n],\n\"otherData\":")
        .ok_or_else(truncated)?;
    let dropped = tail
        .strip_prefix("{\"dropped_events\":")
        .and_then(|n| n.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(truncated)?;
    if !tail.trim_end().ends_with("}}") {
        return Err(truncated());
    }
    let mut out = Vec::new();
    for (i, line) in events.lines().enumerate() {
        let event = line.trim().trim_end_matches(',');
        if event.is_empty() {
            continue;
        }
        if !whole_object(event) {
            return Err(MergeError::BadEvent {
                name: name.to_string(),
                line: i + 2,
                text: event.chars().take(80).collect(),
            });
        }
        out.push(event);
    }
    Ok((out, dropped))
}

/// Merges trace documents written by [`super::merge`] (ranks of other
/// processes), each `(name, text)`, into one: their events in one
/// `traceEvents` array, their dropped events summed. Any document that is
/// not whole is refused, naming it.
pub fn merge_documents(docs: &[(String, String)]) -> Result<String, MergeError> {
    let mut out = String::from(HEAD);
    let (mut first, mut dropped) = (true, 0u64);
    for (name, text) in docs {
        let (evs, d) = events(name, text)?;
        dropped += d;
        for e in evs {
            if !first {
                out.push_str(",\n");
            }
            out.push_str(e);
            first = false;
        }
    }
    let _ = write!(
        out,
        "\n],\n\"otherData\":{{\"dropped_events\":{dropped},\"capacity_per_rank\":{}}}}}\n",
        Trace::capacity()
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn doc(rank: u32) -> (String, String) {
        let t = Trace::new(rank);
        t.barrier(1, Instant::now(), true);
        t.race(
            [rank, rank + 1],
            "a \"quoted\" ] brace } in a string".into(),
        );
        (format!("rank-{rank}.json"), t.to_json())
    }

    #[test]
    fn merged_documents_hold_every_rank_s_events_in_one_array() {
        let docs: Vec<_> = (0..3).map(doc).collect();
        let all = merge_documents(&docs).expect("whole documents");
        assert!(all.starts_with(HEAD));
        assert!(
            all.trim_end()
                .ends_with(r#""otherData":{"dropped_events":0,"capacity_per_rank":1048576}}"#),
            "{all}"
        );
        for r in 0..3 {
            assert!(
                all.contains(&format!(r#""args":{{"name":"rank {r}"}}"#)),
                "{all}"
            );
        }
        assert_eq!(all.matches("barrier epoch 1").count(), 3);
        // The merge of merges is a document too.
        let again = merge_documents(&[("all.json".into(), all.clone())]).expect("whole");
        assert_eq!(again, all);
    }

    #[test]
    fn a_truncated_document_is_refused_by_name_wherever_it_was_cut() {
        let (name, text) = doc(1);
        for cut in [text.len() - 3, text.len() / 2, HEAD.len() + 5, 10] {
            let e = merge_documents(&[doc(0), (name.clone(), text[..cut].to_string())])
                .expect_err("truncated");
            let msg = e.to_string();
            assert!(msg.starts_with("rank-1.json "), "cut at {cut}: {msg}");
        }
    }

    #[test]
    fn another_program_s_json_and_a_broken_event_are_refused() {
        let e = merge_documents(&[("x.json".into(), "{\"traceEvents\":[]}".into())])
            .expect_err("not pld's");
        assert!(matches!(e, MergeError::NotPld { .. }), "{e}");
        let (name, text) = doc(0);
        let broken = text.replacen("\"ph\":", "\"ph\":{", 1);
        let e = merge_documents(&[(name, broken)]).expect_err("broken event");
        assert!(matches!(e, MergeError::BadEvent { line: 2, .. }), "{e}");
    }

    #[test]
    fn whole_objects_are_told_from_broken_ones() {
        assert!(whole_object(r#"{"a":"}\"{","b":[1,{"c":2}]}"#));
        assert!(!whole_object(r#"{"a":"#));
        assert!(!whole_object(r#"{"a":1}}"#));
        assert!(!whole_object(r#"{"a":"unclosed}"#));
        assert!(!whole_object(r#"["a"]"#));
        assert!(!whole_object(r#"{"a":1} {"b":2}"#));
    }
}
